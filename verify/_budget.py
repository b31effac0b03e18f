"""A work budget: what makes `check`'s ``proved`` independent of the machine's speed and load.

With a wall-clock timeout alone, whether a property is proved depends on
how busy the machine was; `certfsm distill` puts that verdict into an
artifact whose bytes must not depend on it (docs/semantics.md,
"Reproducible verdicts"). A `WorkBudget` counts work instead of seconds:

- `boxes`: sub-boxes bounded by the branch and bound (every box of the
  search tree is bounded once, whatever the order, so a proof whose tree
  has at most this many boxes is found, and one whose tree is larger is
  not, on any machine);
- `engine_queries`: exact Z3 queries on boxes that bounds left open;
- `z3_rlimit`: Z3's deterministic resource count per query (its
  ``rlimit``), instead of a Z3 timeout. Marabou, whose answers depend on
  its time limit and whose UNSAT never closes a box alone, is not asked.

The wall-clock timeout stays as a guard only: when it fires before the
budget is spent, the answer would depend on the machine, so the Result
says so (``stats["wall_clock_guard"]``) and callers that need
reproducibility fail loudly (`certfsm.fsm.distill`).
"""

from __future__ import annotations

from dataclasses import dataclass

WALL_CLOCK_GUARD = "wall_clock_guard"
"""The `Result.stats` key set (True) when the wall-clock guard ended a budgeted check."""


@dataclass(frozen=True)
class WorkBudget:
    """Work counts that end a check deterministically (see the module docstring); every count >= 1."""

    boxes: int = 20_000
    engine_queries: int = 8
    z3_rlimit: int = 20_000_000

    def __post_init__(self) -> None:
        for name in ("boxes", "engine_queries", "z3_rlimit"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(
                    f"WorkBudget.{name}={value!r} is not a positive integer; give e.g. "
                    f"{name}={getattr(WorkBudget, name)}"
                )

    def to_json(self) -> dict:
        return {"boxes": self.boxes, "engine_queries": self.engine_queries, "z3_rlimit": self.z3_rlimit}
