"""Values that refuse changes: frozen specs, IRs and loaded artifacts stay exactly as checked and hashed.

`ReadOnlyDict` for mappings, `frozen_array` for the numpy arrays held by
the frozen dataclasses of verify and fsm (`Property`, `Grid`, `Table`).
"""

from __future__ import annotations

import numpy as np


def frozen_array(values, dtype=None) -> np.ndarray:
    """A read-only copy of `values` as a numpy array (of `dtype` when given)."""
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array


class ReadOnlyDict(dict):
    """Still a dict for json and isinstance, and picklable; every mutating method raises TypeError(`refusal`)."""

    refusal = "this mapping is read-only"

    def _refuse(self, *args, **kwargs):
        raise TypeError(self.refusal)

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        return (type(self), (dict(self),))
