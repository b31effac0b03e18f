"""One colour per token, shared by every picture certfsm draws (decision maps, audit reports).

The same token has the same colour in the distillation's decision map and
in the runtime's audit report, so a reader can put the two side by side.
matplotlib is imported when a colour is asked for, never on import.
"""

from __future__ import annotations

import numpy as np


def token_colours(n_outputs: int) -> np.ndarray:
    """(n_outputs, 4) RGBA: one distinct colour per output index (tab10, tab20 beyond ten tokens)."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if n_outputs <= 10 else "tab20"]
    return np.array([palette(k % palette.N) for k in range(n_outputs)])
