"""The monitor's state as a small JSON document, and its checked restore.

An audit log or a checkpoint stores the monitor between runs; a replay
restores it and must continue exactly where the original run was. The
document holds only what cannot be derived: per path the violation flags
and (for a windowed statistic) the samples of the last `window` cycles,
the breach latch, the recovery count and the two counters. Sorted lists,
exact sums and counts are rebuilt on restore.

Format 1::

    {"certfsm_sla_snapshot": 1, "paths_sha256": <hex>, "cycle": n,
     "paths": [{"name": ..., "violations": "0110", "samples": [1.5, null, 2.0],
                "breached": bool, "recovery_count": k, "breaches": b, "recoveries": r}, ...]}

`violations` is one character per cycle, oldest first, "1" for a
violation; `samples` (windowed statistics only) one entry per cycle,
oldest first: null for a cycle without a sample, a JSON number for a
sample that is a float64 (a float's ``repr`` reads back as that float),
and a string "p/q" or "p" (lowest terms) for the exact value of any other
sample (an int, Fraction or Decimal metric that no float64 equals). A
sample is never negative, NaN or infinite, so neither is an entry.
Leading empty entries ("0", null) are left out: they mean the same as the
cycles before the first.
`paths_sha256` fingerprints the path definitions, so that a state is
never restored into a monitor whose limits or windows differ. A restore
checks every field and every invariant a run keeps (a breached path is
over or recovering, counters agree with the latch) and changes nothing
unless all hold.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from certfsm import CertfsmError, decimal_value

from ._sample import FLOAT_MAX, Sample, canonical

if TYPE_CHECKING:
    from certfsm import SlaPath

    from ._path import PathMonitor

SNAPSHOT_FORMAT = 1

PathLoad = tuple[list[bool], list[Sample | None], bool, int, int, int]
"""What a restore loads into one path: violation flags, samples, breached, recovery count, breaches, recoveries."""


class SnapshotError(CertfsmError, ValueError):
    """A monitor snapshot is malformed, or was taken from a monitor with other SLA paths."""


_RATIONAL = re.compile(r"(0|[1-9][0-9]*)(/[1-9][0-9]*)?")
"""A sample's exact value as a snapshot writes it: "p" or "p/q", no sign, no leading zeros."""


def _limit_key(limit: float) -> float | str:
    """The limit in a path's fingerprint: its float when that float denotes the same decimal, else "p/q"."""
    exact = decimal_value(limit)
    if abs(exact) <= FLOAT_MAX and decimal_value(float(exact)) == exact:
        return float(exact)
    return str(exact)


def paths_fingerprint(paths: Iterable[SlaPath]) -> str:
    """SHA-256 of the path definitions in a canonical JSON form."""
    rows = [
        [
            p.name,
            p.metric,
            _limit_key(p.limit),
            p.window,
            p.max_violations,
            p.recovery_cycles,
            None if p.tokens is None else list(p.tokens),
            p.statistic,
        ]
        for p in paths
    ]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def path_state(path_monitor: PathMonitor) -> dict[str, Any]:
    """One path's entry of the snapshot document."""
    state: dict[str, Any] = {
        "name": path_monitor.name,
        "violations": "".join("1" if v else "0" for v in path_monitor.violations.entries()),
    }
    if path_monitor.statistic.is_windowed:
        state["samples"] = [
            sample if sample is None or type(sample) is float else str(sample)
            for sample in path_monitor.statistic.entries()
        ]
    state.update(
        breached=path_monitor.breached,
        recovery_count=path_monitor.recovery_count,
        breaches=path_monitor.breaches,
        recoveries=path_monitor.recoveries,
    )
    return state


def _fail(text: str) -> SnapshotError:
    return SnapshotError(f"SLA snapshot: {text}")


def _integer(value: Any, where: str, lowest: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise _fail(
            f"{where}={value!r} is not an integer >= {lowest}; restore a snapshot written by SlaMonitor.snapshot"
        )
    return value


def _object(value: Any, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != set(keys):
        given = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise _fail(
            f"{where} has {given}, expected the keys {', '.join(keys)}; "
            "restore a snapshot written by SlaMonitor.snapshot"
        )
    return value


def check_snapshot(document: Any, path_monitors: Sequence[PathMonitor], fingerprint: str) -> tuple[int, list[PathLoad]]:
    """Check `document` against the monitor's paths; returns the cycle and, per path, what to load."""
    _object(document, "the document", ("certfsm_sla_snapshot", "paths_sha256", "cycle", "paths"))
    if type(document["certfsm_sla_snapshot"]) is not int or document["certfsm_sla_snapshot"] != SNAPSHOT_FORMAT:
        raise _fail(
            f"certfsm_sla_snapshot={document['certfsm_sla_snapshot']!r} is not format {SNAPSHOT_FORMAT}; "
            "restore it with the certfsm version that wrote it"
        )
    if document["paths_sha256"] != fingerprint:
        raise _fail(
            f"paths_sha256={document['paths_sha256']!r} differs from this monitor's {fingerprint!r}: "
            "the snapshot was taken with other SLA path definitions; restore it into a monitor of the same spec"
        )
    cycle = _integer(document["cycle"], "cycle")
    states = document["paths"]
    if not isinstance(states, list) or len(states) != len(path_monitors):
        raise _fail(
            f"paths is not a list of {len(path_monitors)} path states; "
            "restore a snapshot written by SlaMonitor.snapshot"
        )
    loads = []
    for k, (state, monitor) in enumerate(zip(states, path_monitors)):
        loads.append(_check_path_state(state, monitor, f"paths[{k}]", cycle))
    return cycle, loads


def _sample_entry(value: Any, where: str) -> Sample | None:
    """One entry of a path's `samples`: None, or the canonical sample it writes (see the module docstring)."""
    if value is None:
        return None
    if isinstance(value, str):
        exact = Fraction(value) if _RATIONAL.fullmatch(value) else None
        if exact is None or str(exact) != value or exact > FLOAT_MAX or type(canonical(exact)) is float:
            raise _fail(
                f"{where}={value!r} is not 'p/q' in lowest terms for a sample that no float64 equals "
                "(a float64 sample is written as a number)"
            )
        return exact
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(f"{where}={value!r} is neither a number, a string 'p/q' nor null")
    if not 0 <= value <= FLOAT_MAX:  # NaN fails too
        raise _fail(
            f"{where}={value!r} is not a sample (a finite number >= 0): NaN, infinities and negatives are "
            "violations that leave no sample"
        )
    return canonical(Fraction(value))


def _check_path_state(state: Any, monitor: PathMonitor, at: str, cycle: int) -> PathLoad:
    windowed = monitor.statistic.is_windowed
    keys = (
        ("name", "violations")
        + (("samples",) if windowed else ())
        + ("breached", "recovery_count", "breaches", "recoveries")
    )
    _object(state, at, keys)
    if state["name"] != monitor.name:
        raise _fail(f"{at}.name={state['name']!r} differs from this monitor's path {monitor.name!r}")
    longest = min(monitor.violations.size, cycle)
    flags = state["violations"]
    if not isinstance(flags, str) or set(flags) - {"0", "1"} or len(flags) > longest:
        raise _fail(
            f"{at}.violations={flags!r} is not a string of at most {longest} '0'/'1' characters "
            "(window and cycle bound it)"
        )
    violations = [c == "1" for c in flags]
    samples: list[Sample | None] = []
    if windowed:
        given = state["samples"]
        if not isinstance(given, list) or len(given) > longest:
            raise _fail(f"{at}.samples is not a list of at most {longest} entries (window and cycle bound it)")
        samples = [_sample_entry(value, f"{at}.samples[{j}]") for j, value in enumerate(given)]
    breached = state["breached"]
    if not isinstance(breached, bool):
        raise _fail(f"{at}.breached={breached!r} is not true or false")
    recovery_count = _integer(state["recovery_count"], f"{at}.recovery_count")
    breaches = _integer(state["breaches"], f"{at}.breaches")
    recoveries = _integer(state["recoveries"], f"{at}.recoveries")
    over = sum(violations) > monitor.max_violations
    if over and (not breached or recovery_count):
        raise _fail(
            f"{at}: {sum(violations)} violations in the window exceed max_violations={monitor.max_violations}, "
            f"so the path must be breached with recovery_count 0, not breached={breached} "
            f"recovery_count={recovery_count}"
        )
    if breached and not over and recovery_count >= monitor.recovery_cycles:
        raise _fail(
            f"{at}.recovery_count={recovery_count} is not below recovery_cycles={monitor.recovery_cycles} "
            "while the path is breached (it would have recovered)"
        )
    if not breached and recovery_count:
        raise _fail(f"{at}.recovery_count={recovery_count} is not 0 while the path is healthy")
    if breaches - recoveries != breached:
        raise _fail(
            f"{at}: breaches={breaches} and recoveries={recoveries} disagree with breached={breached} "
            "(each breach ends in a recovery, except a breach still running)"
        )
    return violations, samples, breached, recovery_count, breaches, recoveries
