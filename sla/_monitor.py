"""The SLA monitor: every path of a spec, one `update` per machine cycle, one `sla_ok` out.

The monitor is the boundary between measured metrics and the certified
machine: it checks what it is given (metric types, the token name)
before it changes anything, so a refused update leaves the state as it
was; then it advances each path (`certfsm.sla._path`, where violation,
breach and recovery are defined) and reports `SlaStatus.ok`, which the
caller passes to the machine's step as `sla_ok` in the same cycle.

It reads no clock and no environment: time enters only as the sequence of
updates, and metrics only as arguments, so the same inputs give the same
statuses in a live run, a replay and a restored copy. It is not
thread-safe by itself; the runtime calls it under the lock of its step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from certfsm import SlaPath, SpecError

from ._path import PathMonitor, check_path
from ._sample import Sample, read_metric
from ._snapshot import SNAPSHOT_FORMAT, check_snapshot, path_state, paths_fingerprint
from ._status import SlaStatus

_INF = math.inf

ValueCheck = tuple[str, float, frozenset[str] | None]
"""A ``value`` path's quick check: (metric, largest float64 <= the limit, tokens or None for every token)."""
MissingMetric = Callable[[str, str], object]
"""`SlaMonitor.on_missing(metric, path_name)`: told of a path that applies in a cycle whose metrics lack its metric."""


class SpecWithSla(Protocol):
    """What `SlaMonitor.from_spec` reads of a `certfsm.ControllerSpec` (this package imports no more of the core)."""

    @property
    def sla_paths(self) -> Iterable[SlaPath]: ...

    @property
    def outputs(self) -> Iterable[str]: ...


class SlaMonitor:
    """Monitors the SLA paths of a spec; `update` once per cycle gives the `sla_ok` of that cycle.

    Build it with `SlaMonitor.from_spec(spec)`, or from paths (objects with
    the fields of `certfsm.SlaPath`) and optionally the token names
    the machine can emit; with `tokens` given, an update naming another
    token is refused (a typo would otherwise make every scoped path
    silently not apply). Path names are unique; statuses list the paths
    in the given order.

    `on_missing` (None, or a callable of (metric, path name)) is told, every
    such cycle, of each path that applies while its metric is absent from
    the metrics (a missing metric is a violation, docs/semantics.md, "SLA
    paths"): the runtime sets it to warn once. It runs only on the cycles
    the quiet check already passes to the full update, so it costs nothing
    while the metrics are given.
    """

    __slots__ = (
        "paths",
        "tokens",
        "cycle",
        "_monitors",
        "_metrics",
        "_fingerprint",
        "_ok",
        "_accepted",
        "_value_checks",
        "_quiet_checks",
        "on_missing",
    )

    def __init__(self, paths: Iterable[SlaPath] = (), *, tokens: Iterable[str] | None = None) -> None:
        self.paths = tuple(paths)
        self.tokens = None if tokens is None else frozenset(tokens)
        seen: dict[str, int] = {}
        for index, path in enumerate(self.paths):
            check_path(path, index, self.tokens)
            if path.name in seen:
                raise SpecError(
                    f"sla path {path.name!r} (paths[{index}]): name repeats paths[{seen[path.name]}]; "
                    "give each path its own name"
                )
            seen[path.name] = index
        self._metrics = tuple(dict.fromkeys(path.metric for path in self.paths))
        self._monitors = self._fresh_monitors()
        self._fingerprint = paths_fingerprint(self.paths)
        self.cycle = 0
        self._ok = True
        self._accepted: set[str] = set()  # names of `tokens` already checked (update_ok checks each once)
        self._value_checks = self._checks_of_value_paths()
        self._quiet_checks = self._quiet()
        self.on_missing: MissingMetric | None = None

    @classmethod
    def from_spec(cls, spec: SpecWithSla) -> SlaMonitor:
        """The monitor of a `ControllerSpec`'s `sla_paths`, accepting the spec's output token names."""
        return cls(spec.sla_paths, tokens=spec.outputs)

    @classmethod
    def from_document(cls, spec: Mapping[str, Any]) -> SlaMonitor:
        """The monitor of a spec document as an artifact stores it (``ControllerSpec.to_json()``).

        The runtime reads specs from artifacts this way, without the spec
        loader (which needs jsonschema); the paths get the same checks.
        """
        paths = tuple(
            SlaPath(**{**dict(path), **({"tokens": tuple(path["tokens"])} if path.get("tokens") else {})})
            for path in (spec.get("sla") or {}).get("paths", ())
        )
        return cls(paths, tokens=tuple(spec["outputs"]))

    @property
    def ok(self) -> bool:
        """The `ok` of the last update (True before the first: no path starts breached)."""
        return self._ok

    def update(self, metrics: Mapping[str, Any] | None, token: str) -> SlaStatus:
        """Advance every path by one cycle; returns the status whose `ok` is this cycle's `sla_ok`.

        `metrics` maps metric names to this cycle's measurements, real
        numbers read exactly (None: not measured; NaN, an infinity or a
        negative: no valid sample; each is a violation where a path applies;
        names no path uses are ignored; None for the whole mapping: nothing
        measured). `token` names the decision
        path the metrics were measured on: the token in force while the
        measured work ran. Raises TypeError or ValueError, changing nothing,
        for a non-numeric metric or an unknown token.
        """
        ok = self._advance(metrics, token)
        return SlaStatus(self.cycle, ok, tuple([monitor.status() for monitor in self._monitors]))

    def update_ok(self, metrics: Mapping[str, Any] | None, token: str) -> bool:
        """`update(metrics, token).ok` without building the statuses: the runtime's call, once per control cycle.

        The same checks and the same state change as `update` (which is
        `_advance` plus the statuses), at a fraction of its cost; while
        every path is quiet (`_quiet`) a good cycle changes nothing but
        the cycle count, so it is decided by comparing each sample with
        its limit and nothing else.
        """
        checks = self._quiet_checks
        if checks is not None and type(metrics) is dict:
            try:
                quiet = token in self._accepted
            except TypeError:  # an unhashable token: certainly not a token name; _advance refuses it
                quiet = False
            if quiet:
                for metric, limit, tokens in checks:
                    sample = metrics.get(metric)
                    # Good: a float from 0 up to the limit's float side (NaN and negatives, -inf included, fail the
                    # first comparison, +inf the second); any other value is left to _advance.
                    if not (type(sample) is float and 0.0 <= sample <= limit) and (tokens is None or token in tokens):
                        break
                else:
                    self.cycle += 1
                    return True
        return self._advance(metrics, token)

    def _advance(self, metrics: Mapping[str, Any] | None, token: str) -> bool:
        """Check the cycle's inputs, then advance every path by one cycle; returns `ok`."""
        if type(metrics) is not dict:
            if metrics is None:
                metrics = {}
            elif not isinstance(metrics, Mapping):
                raise TypeError(
                    f"metrics={metrics!r} is a {type(metrics).__name__}, not a mapping; "
                    "give a dict from metric name to value"
                )
        samples: list[Sample | None] = []
        unread = False  # some metric is no finite float >= 0: perhaps absent (`_tell_missing`)
        for name in self._metrics:
            value = metrics.get(name)
            # The common case first: a finite float >= 0 (NaN, negatives and +-inf fail the chained comparison).
            if type(value) is float and 0.0 <= value < _INF:
                samples.append(value + 0.0)
            else:
                samples.append(read_metric(name, value))
                unread = True
        try:
            accepted = token in self._accepted
        except TypeError:  # unhashable: certainly not a token name
            accepted = False
        if not accepted:
            self._accept(token)
        if unread and self.on_missing is not None:
            self._tell_missing(metrics, token)
        self.cycle += 1
        ok = True
        for monitor in self._monitors:
            if monitor.advance(samples[monitor.sample_index], token):
                ok = False  # and go on: every path advances every cycle
        self._ok = ok
        self._quiet_checks = self._quiet()
        return ok

    def _tell_missing(self, metrics: Mapping[str, Any], token: str) -> None:
        """Call `on_missing(metric, path)` for each path that applies this cycle and whose metric is absent from
        `metrics` (not a None or NaN given for it: those say "not measured" on purpose); before anything changes,
        so a hook that raises (a warning turned into an error) leaves the monitor as it was."""
        hook = self.on_missing
        if hook is None:
            return
        for monitor in self._monitors:
            if monitor.metric not in metrics and (monitor.every_token or token in monitor.tokens):
                hook(monitor.metric, monitor.name)

    def _quiet(self) -> tuple[ValueCheck, ...] | None:
        """`_value_checks` when every path is quiet, else None.

        A path is quiet when its statistic is ``value`` (no samples kept),
        its window holds no violation and it is not breached. A good cycle
        (the path does not apply, or its sample is a float from 0 up to the
        largest float64 <= the limit) then pushes an unset flag into a
        window of unset flags and leaves the path as it was: a ring of
        equal flags looks the same from every position, so even the ring's
        position is not observable (snapshots list the flags from the first
        set one).
        Only the last cycle's figures that `update` reports (applies,
        statistic, violation) would change, and `update` never takes this
        way. Called after every cycle that advanced the paths; `_ok` is
        False exactly when some path is breached.
        """
        if self._value_checks is None or not self._ok:
            return None
        for monitor in self._monitors:
            if monitor.violations.count:
                return None
        return self._value_checks

    def _checks_of_value_paths(self) -> tuple[ValueCheck, ...] | None:
        """(metric, largest float64 <= the limit, tokens or None) per path when every path is a ``value`` path,
        else None. With `tokens` None the monitor remembers no token names, so there is no accepted set to check
        a token against: None too (no shortcut)."""
        if self.tokens is None:
            return None
        checks: list[ValueCheck] = []
        for monitor in self._monitors:
            if monitor.value_limit is None:
                return None
            checks.append((monitor.metric, monitor.value_limit, None if monitor.every_token else monitor.tokens))
        return tuple(checks)

    def _fresh_monitors(self) -> tuple[PathMonitor, ...]:
        return tuple(PathMonitor(path, self._metrics.index(path.metric)) for path in self.paths)

    def _accept(self, token: object) -> None:
        """Refuse a token that is not a name of this monitor's tokens; remember one of `tokens` once accepted
        (with `tokens` None any name goes, and nothing is remembered, so no set grows with the names seen)."""
        if type(token) is not str and not isinstance(token, str):
            raise TypeError(
                f"token={token!r} is a {type(token).__name__}, not a token name; give the name of the token"
            )
        if self.tokens is not None and token not in self.tokens:
            raise ValueError(
                f"token={token!r} is not a token of this monitor (known: {', '.join(sorted(self.tokens))}); "
                "give the name of the token the metrics were measured on"
            )
        if self.tokens is not None:
            self._accepted.add(token)

    def snapshot(self) -> dict[str, Any]:
        """The state as a JSON-ready document (format in `certfsm.sla._snapshot`); `restore` takes it back."""
        return {
            "certfsm_sla_snapshot": SNAPSHOT_FORMAT,
            "paths_sha256": self._fingerprint,
            "cycle": self.cycle,
            "paths": [path_state(monitor) for monitor in self._monitors],
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Continue from `snapshot` (taken from a monitor of the same paths); on SnapshotError nothing changes."""
        cycle, loads = check_snapshot(snapshot, self._monitors, self._fingerprint)
        fresh = self._fresh_monitors()
        for monitor, (violations, samples, breached, recovery_count, breaches, recoveries) in zip(fresh, loads):
            monitor.violations.load(violations)
            monitor.statistic.load(samples)
            monitor.breached, monitor.recovery_count = breached, recovery_count
            monitor.breaches, monitor.recoveries = breaches, recoveries
        self._monitors, self.cycle = fresh, cycle
        self._ok = not any(monitor.breached for monitor in fresh)
        self._quiet_checks = self._quiet()

    def copy(self) -> SlaMonitor:
        """An independent monitor in the same state (what-if runs, a replay checking a live one)."""
        clone = SlaMonitor.__new__(SlaMonitor)
        clone.paths, clone.tokens, clone.cycle = self.paths, self.tokens, self.cycle
        clone._metrics, clone._fingerprint, clone._ok = self._metrics, self._fingerprint, self._ok
        clone._accepted = set(self._accepted)
        clone._value_checks, clone._quiet_checks = self._value_checks, self._quiet_checks
        clone._monitors = tuple(monitor.copy() for monitor in self._monitors)
        clone.on_missing = None  # a copy runs what-ifs and replays: the hook's owner did not ask about those
        return clone

    def __repr__(self) -> str:
        names = ", ".join(path.name for path in self.paths) or "no paths"
        return f"SlaMonitor({names}; cycle {self.cycle}, {'ok' if self._ok else 'breached'})"
