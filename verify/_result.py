"""What an engine answers: the core's one verdict record (`certfsm.VerdictRecord`) with the evidence.

The three verdicts and their meaning are the core's (`certfsm._verdict`):
``proved`` (a complete engine, or sound bound propagation, showed the
unsafe set empty over the whole box), ``violated`` (a counterexample that
re-evaluates, in numpy float64 and in onnxruntime, to a real violation),
``unknown`` with the reason (timeout, solver error, spurious or
unvalidated counterexample, disagreement between engines), never
silently promoted to ``proved``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from certfsm import PROVED, UNKNOWN, VERDICTS, VIOLATED, VerdictRecord

__all__ = ["PROVED", "UNKNOWN", "VERDICTS", "VIOLATED", "Result"]


@dataclass(frozen=True, eq=False)
class Result(VerdictRecord):
    """One property's verdict, who decided it, how long it took and why, with the counterexample.

    `counterexample` is set only with ``violated`` (the input, float64) and
    `outputs` holds the network's float64 scores there. `engine` names what
    decided ("falsify", "bounds", "marabou", "z3", "marabou+bounds" ...).
    `stats` carries engine-specific numbers (sub-boxes, splits, queries).
    `check` names the property it checked (`property`). `proof`, on a
    ``proved`` from branch and bound, holds the `_split.Closure` of every
    disjunct on every box of the partition it built and the `_split.Cut`
    of every box it halved, from which `_certificate` writes a proof
    certificate (None: not recorded).
    Compared by identity: it carries arrays.
    """

    counterexample: np.ndarray | None = None
    outputs: np.ndarray | None = None
    stats: dict = field(default_factory=dict)
    proof: tuple | None = None

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.verdict == VIOLATED and self.counterexample is None:
            raise ValueError("a violated verdict needs its counterexample")
        if self.verdict != VIOLATED and self.counterexample is not None:
            raise ValueError(f"a {self.verdict} verdict carries no counterexample")
