"""Read-only numpy arrays for the frozen dataclasses (the spec's envelope, `Property`, `Grid`, `Table`).

It lives apart from `_readonly`, which stays standard library only because
the runtime imports it without numpy.
"""

from __future__ import annotations

import numpy as np


def frozen_array(values, dtype=None) -> np.ndarray:
    """A read-only copy of `values` as a numpy array (of `dtype` when given)."""
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array
