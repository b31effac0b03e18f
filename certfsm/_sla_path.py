"""An SLA path of a controller spec: its own light module, so that the runtime reads it without the spec loader.

`certfsm._spec` (which validates spec files with jsonschema) and
`certfsm.sla` (which the runtime imports with the standard library alone)
both use this one dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass

SLA_STATISTICS = ("value", "p50", "p95", "p99", "mean")


@dataclass(frozen=True)
class SlaPath:
    """A monitored path: `statistic` of `metric` <= `limit` on the cycles of `tokens`, with at most
    `max_violations` violations per `window` cycles, healthy again after `recovery_cycles` good cycles.

    `tokens` lists the decision paths the SLA applies to: legal tokens, in
    output order; None means every token (a list naming every legal token
    is stored as None too, so that equal meaning gives equal specs and
    equal artifact bytes).
    `statistic` is one of `SLA_STATISTICS`. The exact meaning of a
    violation, a breach and a recovery is stated once, in `certfsm.sla`.
    """

    name: str
    metric: str
    limit: float
    window: int
    max_violations: int
    recovery_cycles: int
    tokens: tuple[str, ...] | None = None
    statistic: str = "value"
