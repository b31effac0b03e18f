"""The runtime's one-time warnings: inputs that silently make cycles fall back.

A reading that lacks an input is out of the envelope (docs/semantics.md,
"Cells") and a missing SLA metric is a violation (docs/semantics.md, "SLA
paths"): both are fallbacks by design, and a controller given them keeps
deciding. What this module adds is that the first such cycle says so, once
per controller and cause, naming what is missing and the fix.

Why `warnings` rather than `logging`: an embedder's mistake in how it calls
a library is what Python's warnings are for (as numpy's RuntimeWarning or
DeprecationWarning): they show once per call site by default, point at the
caller's line, and a user filters them or turns them into errors by class
(``warnings.simplefilter("error", RuntimeInputWarning)``; pytest's ``-W
error``), where a log record would need the embedder to configure logging
before it could see it. Under an "error" filter the cycle raises before
anything changes, every time, since the warning was not shown.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Collection, Hashable

_OWN_MODULES = ("certfsm.runtime.", "certfsm.sla.")


class RuntimeInputWarning(UserWarning):
    """A reading or the SLA metrics of a `Controller.step` lack something the certified machine reads, so the
    cycle falls back (FALLBACK_ENVELOPE or FALLBACK_SLA); told once per controller and cause."""


def warn_once(told: set[Hashable], causes: Collection[Hashable], message: str) -> None:
    """Warn `message` (a `RuntimeInputWarning`) about `causes`, none of which may be in `told` yet; note them there
    once the warning was shown (a warning made an error raises here and notes nothing, so every such cycle
    raises)."""
    warnings.warn(RuntimeInputWarning(message), stacklevel=_callers_level())
    told.update(causes)


def _callers_level() -> int:
    """The `stacklevel` that points `warnings.warn` in `warn_once` at the first frame outside the runtime and
    the SLA monitor: the embedder's call of `step`, whichever internal path the cycle took."""
    level, frame = 2, sys._getframe(2)  # 1: warn_once itself; 2: its caller
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith(_OWN_MODULES):
        level, frame = level + 1, frame.f_back
    return level
