"""`SlaMonitor.on_missing`: told of each path that applies while its metric is absent, before anything changes.

The oracle is the definition (docs/semantics.md, "SLA paths"): a missing
metric is a violation only where the path applies, so the hook is told
exactly then; a metric given as None or NaN is "not measured" on purpose
and is not told; the statuses are those of a monitor without a hook.
"""

from __future__ import annotations

import math

import pytest

from certfsm import SlaPath
from certfsm.sla import SlaMonitor

TOKENS = ("KEEP", "FUSE_CONV", "INT4")


def paths() -> tuple[SlaPath, ...]:
    return (
        SlaPath(name="lat", metric="latency_ms", limit=10.0, window=4, max_violations=1, recovery_cycles=3),
        SlaPath(
            name="p95",
            metric="queue_ms",
            limit=5.0,
            window=8,
            max_violations=2,
            recovery_cycles=0,
            statistic="p95",
            tokens=("INT4",),
        ),
    )


CYCLES = [
    ({"latency_ms": 1.0, "queue_ms": 1.0}, "INT4"),
    (None, "KEEP"),  # nothing measured: lat applies, p95 does not (scoped to INT4)
    ({"queue_ms": 1.0}, "INT4"),
    ({"latency_ms": None, "queue_ms": math.nan}, "INT4"),  # said to be not measured: violations, not told
    ({"latency_ms": 2.0}, "INT4"),
    ({"latency_ms": 2.0}, "KEEP"),
    ({}, "FUSE_CONV"),
]


def test_the_hook_is_told_of_each_applying_path_whose_metric_is_absent_and_nothing_else_changes():
    heard: list[tuple[int, str, str]] = []
    monitor, plain = SlaMonitor(paths(), tokens=TOKENS), SlaMonitor(paths(), tokens=TOKENS)
    monitor.on_missing = lambda metric, path: heard.append((monitor.cycle, metric, path))
    for metrics, token in CYCLES:
        assert monitor.update(metrics, token) == plain.update(metrics, token)
        assert monitor.update_ok(metrics, token) == plain.update_ok(metrics, token)
    # each cycle runs twice (update, then update_ok), so each telling comes in a pair of consecutive cycles
    assert heard == [
        (2, "latency_ms", "lat"),
        (3, "latency_ms", "lat"),
        (4, "latency_ms", "lat"),
        (5, "latency_ms", "lat"),
        (8, "queue_ms", "p95"),
        (9, "queue_ms", "p95"),
        (12, "latency_ms", "lat"),
        (13, "latency_ms", "lat"),
    ]


def test_a_hook_that_raises_leaves_the_monitor_as_it_was():
    monitor = SlaMonitor(paths(), tokens=TOKENS)
    monitor.update({"latency_ms": 50.0, "queue_ms": 1.0}, "INT4")
    before = monitor.snapshot()

    def refuse(metric: str, path: str) -> None:
        raise RuntimeError(f"{metric} of {path}")

    monitor.on_missing = refuse
    with pytest.raises(RuntimeError, match="^latency_ms of lat$"):
        monitor.update_ok({"queue_ms": 1.0}, "INT4")
    assert monitor.snapshot() == before and monitor.cycle == 1


def test_no_hook_is_the_default_and_a_copy_does_not_carry_one():
    monitor = SlaMonitor(paths(), tokens=TOKENS)
    assert monitor.on_missing is None
    monitor.update(None, "INT4")  # no hook: nothing to tell
    monitor.on_missing = print
    assert monitor.copy().on_missing is None
