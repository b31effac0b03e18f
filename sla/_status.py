"""What the monitor reports after each cycle: one `PathStatus` per path and the `SlaStatus` around them.

Immutable values, so a status can be logged, compared in a replay and
handed to another thread without copying. They are named tuples rather
than frozen dataclasses because one is built per path on every machine
cycle: a frozen dataclass costs about 1.5 us to build here, a named
tuple 0.3 us, and the runtime's whole step is budgeted in microseconds.
(A named tuple also compares equal to a plain tuple of its fields; compare
statuses with statuses.) `to_json` gives the form the audit log and the
exporters write (JSON types only; a statistic is a finite float or null).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class PathStatus(NamedTuple):
    """One path after one cycle (the terms are defined in `certfsm.sla`).

    `applies`: the cycle's token is one of the path's tokens.
    `statistic`: the value compared with the limit this cycle; None when
    the path does not apply or there was no sample to compare.
    `violation`: this cycle is a violation. `violations`: violations in
    the last `window` cycles, this one included. `breached`: the path
    holds `sla_ok` false. `recovery_count`: consecutive good cycles
    counted towards `recovery_cycles` while breached (0 when not).
    `breaches`, `recoveries`: transitions into and out of `breached`
    since the monitor started (carried by snapshots).
    """

    name: str
    applies: bool
    statistic: float | None
    violation: bool
    violations: int
    breached: bool
    recovery_count: int
    breaches: int
    recoveries: int

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class SlaStatus(NamedTuple):
    """The monitor after one cycle: `ok` is what the machine gets as `sla_ok` this same cycle.

    `ok` is True exactly when no path is breached (so a monitor without
    paths is always ok). `cycle` counts the updates so far, this one
    included. `breaches` and `recoveries` sum the paths' counters.
    """

    cycle: int
    ok: bool
    paths: tuple[PathStatus, ...]

    @property
    def breaches(self) -> int:
        return sum(path.breaches for path in self.paths)

    @property
    def recoveries(self) -> int:
        return sum(path.recoveries for path in self.paths)

    @property
    def breached_paths(self) -> tuple[str, ...]:
        """Names of the breached paths, in spec order."""
        return tuple(path.name for path in self.paths if path.breached)

    def path(self, name: str) -> PathStatus:
        """The status of the path called `name`."""
        for path in self.paths:
            if path.name == name:
                return path
        known = ", ".join(path.name for path in self.paths) or "none"
        raise KeyError(f"no SLA path named {name!r} (paths: {known})")

    def to_json(self) -> dict[str, Any]:
        return {"cycle": self.cycle, "ok": self.ok, "paths": [path._asdict() for path in self.paths]}
