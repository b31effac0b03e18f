"""What an engine answers, and the only three verdicts certfsm knows.

- ``proved``: a complete engine (or sound bound propagation) showed the
  unsafe set is empty (UNSAT) over the whole box.
- ``violated``: a counterexample that re-evaluates concretely, in numpy
  float64 and in onnxruntime, to a real violation.
- ``unknown``: anything else (timeout, solver error, spurious or
  unvalidated counterexample, disagreement between engines), with the
  reason. Never silently promoted to ``proved``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PROVED = "proved"
VIOLATED = "violated"
UNKNOWN = "unknown"
VERDICTS = (PROVED, VIOLATED, UNKNOWN)


@dataclass(frozen=True, eq=False)
class Result:
    """One property's verdict, who decided it, how long it took and why.

    `counterexample` is set only with ``violated`` (the input, float64) and
    `outputs` holds the network's float64 scores there. `engine` names what
    decided ("falsify", "bounds", "marabou", "z3", "marabou+bounds" ...).
    `stats` carries engine-specific numbers (sub-boxes, splits, queries).
    """

    verdict: str
    engine: str
    seconds: float
    reason: str = ""
    counterexample: np.ndarray | None = None
    outputs: np.ndarray | None = None
    stats: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} is not one of {VERDICTS}")
        if self.verdict == VIOLATED and self.counterexample is None:
            raise ValueError("a violated verdict needs its counterexample")
        if self.verdict != VIOLATED and self.counterexample is not None:
            raise ValueError(f"a {self.verdict} verdict carries no counterexample")

    @property
    def is_proved(self) -> bool:
        return self.verdict == PROVED

    @property
    def is_violated(self) -> bool:
        return self.verdict == VIOLATED
