"""Read-only numpy arrays for the frozen dataclasses (the spec's envelope, `Property`, `Grid`, `Table`).

It lives apart from `_readonly`, which stays standard library only because
the runtime imports it without numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike


def frozen_array(values: ArrayLike, dtype: DTypeLike | None = None) -> np.ndarray:
    """A read-only copy of `values` as a numpy array (of `dtype` when given)."""
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array
