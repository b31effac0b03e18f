"""Read-only numpy arrays for the frozen dataclasses of verify and fsm (`Property`, `Grid`, `Table`).

Apart from `_readonly` (standard library only, which the runtime imports
without numpy).
"""

from __future__ import annotations

import numpy as np


def frozen_array(values, dtype=None) -> np.ndarray:
    """A read-only copy of `values` as a numpy array (of `dtype` when given)."""
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array
