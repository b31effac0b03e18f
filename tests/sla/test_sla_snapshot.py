"""Snapshots: compact JSON, restore continues exactly, copies are independent, bad snapshots refused."""

from __future__ import annotations

import copy
import json

import pytest

from certfsm import SlaPath
from certfsm.sla import SlaMonitor
from certfsm.sla._snapshot import SNAPSHOT_FORMAT, SnapshotError

TOKENS = ("KEEP", "INT4")
PATHS = (
    SlaPath("lat", "latency_ms", 10.0, 4, 1, 3),
    SlaPath("p95", "latency_ms", 10.0, 3, 0, 2, tokens=("INT4",), statistic="p95"),
)
RUN = [(12.0, "INT4"), (3.0, "KEEP"), (None, "INT4"), (4.0, "INT4"), (2.0, "KEEP")]


def monitor_after(cycles=RUN) -> SlaMonitor:
    monitor = SlaMonitor(PATHS, tokens=TOKENS)
    for value, token in cycles:
        monitor.update({"latency_ms": value}, token)
    return monitor


def test_snapshot_is_compact_json():
    snapshot = monitor_after().snapshot()
    assert json.loads(json.dumps(snapshot, allow_nan=False)) == snapshot
    assert snapshot["certfsm_sla_snapshot"] == SNAPSHOT_FORMAT and snapshot["cycle"] == 5
    lat, p95 = snapshot["paths"]
    # lat, window 4: cycles 2..5 (the leading clean cycle 2 left out); the missing metric of cycle 3 is a
    # violation; breached since cycle 3, and cycle 5 is the first good one
    assert lat == {
        "name": "lat",
        "violations": "100",
        "breached": True,
        "recovery_count": 1,
        "breaches": 1,
        "recoveries": 0,
    }
    # p95, window 3: cycles 3..5; INT4 applied in 3 (missing) and 4 (4.0), not in 5 (KEEP)
    assert p95 == {
        "name": "p95",
        "violations": "100",
        "samples": [4.0, None],
        "breached": True,
        "recovery_count": 0,
        "breaches": 1,
        "recoveries": 0,
    }
    assert SlaMonitor(PATHS).snapshot()["paths"][1]["samples"] == []


def test_restore_continues_exactly_where_the_snapshot_was_taken():
    later = [(1.0, "INT4")] * 6 + [(30.0, "INT4"), (None, "KEEP")]
    original = monitor_after()
    restored = SlaMonitor(PATHS, tokens=TOKENS)
    restored.restore(json.loads(json.dumps(original.snapshot())))
    assert restored.cycle == 5 and restored.ok == original.ok is False
    for value, token in later:
        assert restored.update({"latency_ms": value}, token) == original.update({"latency_ms": value}, token)
    assert restored.snapshot() == original.snapshot()


def test_copy_is_independent():
    original = monitor_after()
    clone = original.copy()
    before = original.snapshot()
    for _ in range(6):
        clone.update({"latency_ms": 1.0}, "INT4")
    assert original.snapshot() == before and clone.ok and not original.ok
    assert clone.cycle == 11 and original.cycle == 5


def test_restore_refuses_a_snapshot_of_other_paths():
    other = SlaMonitor([PATHS[0], SlaPath("p95", "latency_ms", 11.0, 3, 0, 2, tokens=("INT4",), statistic="p95")])
    with pytest.raises(
        SnapshotError,
        match=r"^SLA snapshot: paths_sha256='[0-9a-f]{64}' differs from this monitor's "
        r"'[0-9a-f]{64}': the snapshot was taken with other SLA path definitions; ",
    ):
        other.restore(monitor_after().snapshot())


def edit(change):
    def make():
        snapshot = monitor_after().snapshot()
        change(snapshot)
        return snapshot

    return make


def set_at(*path_and_value):
    *path, last, value = path_and_value

    def change(snapshot):
        for key in path:
            snapshot = snapshot[key]
        snapshot[last] = value

    return edit(change)


BAD_SNAPSHOTS = [
    (
        "not-a-dict",
        lambda: [],
        r"^SLA snapshot: the document has list, expected the keys certfsm_sla_snapshot, paths_sha256, "
        r"cycle, paths; restore a snapshot written by SlaMonitor\.snapshot$",
    ),
    ("extra-key", set_at("extra", 1), r"^SLA snapshot: the document has \['certfsm_sla_snapshot', 'cycle', 'extra', "),
    (
        "format",
        set_at("certfsm_sla_snapshot", 2),
        r"^SLA snapshot: certfsm_sla_snapshot=2 is not format 1; restore it with the certfsm version that wrote it$",
    ),
    (
        "format-bool",
        set_at("certfsm_sla_snapshot", True),
        r"^SLA snapshot: certfsm_sla_snapshot=True is not format 1; ",
    ),
    ("cycle", set_at("cycle", -1), r"^SLA snapshot: cycle=-1 is not an integer >= 0; "),
    ("paths-length", edit(lambda s: s["paths"].pop()), r"^SLA snapshot: paths is not a list of 2 path states; "),
    (
        "name",
        set_at("paths", 0, "name", "other"),
        r"^SLA snapshot: paths\[0\]\.name='other' differs from this monitor's path 'lat'$",
    ),
    ("missing-samples", edit(lambda s: s["paths"][1].pop("samples")), r"^SLA snapshot: paths\[1\] has \['breached', "),
    (
        "flags-text",
        set_at("paths", 0, "violations", "1x"),
        r"^SLA snapshot: paths\[0\]\.violations='1x' is not a string of at most 4 '0'/'1' characters \(window and cycle bound it\)$",
    ),
    (
        "flags-longer-than-window",
        set_at("paths", 0, "violations", "10000"),
        r"^SLA snapshot: paths\[0\]\.violations='10000' is not ",
    ),
    (
        "flags-longer-than-cycle",
        edit(lambda s: s.update(cycle=1)),
        r"^SLA snapshot: paths\[0\]\.violations='100' is not a string "
        r"of at most 1 ",
    ),
    (
        "samples-too-long",
        set_at("paths", 1, "samples", [1.0] * 4),
        r"^SLA snapshot: paths\[1\]\.samples is not a list of at most 3 ",
    ),
    (
        "sample-nan",
        set_at("paths", 1, "samples", [float("nan")]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]=nan is not a sample \(a finite number >= 0\): NaN, infinities and "
        r"negatives are violations that leave no sample$",
    ),
    (
        "sample-inf",
        set_at("paths", 1, "samples", [float("inf")]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]=inf is not a sample ",
    ),
    (
        "sample-negative",
        set_at("paths", 1, "samples", [-1.0]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]=-1\.0 is not a sample ",
    ),
    (
        "sample-negative-int",
        set_at("paths", 1, "samples", [-1]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]=-1 is not a sample ",
    ),
    (
        "sample-bool",
        set_at("paths", 1, "samples", [True]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]=True is neither a number, a string 'p/q' nor null$",
    ),
    (
        "sample-text",
        set_at("paths", 1, "samples", ["abc"]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]='abc' is not 'p/q' in lowest terms for a sample that no float64 equals "
        r"\(a float64 sample is written as a number\)$",
    ),
    (
        "sample-text-of-a-float",
        set_at("paths", 1, "samples", ["1"]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]='1' is not 'p/q' ",
    ),
    (
        "sample-half",
        set_at("paths", 1, "samples", ["1/2"]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]='1/2' is not 'p/q' ",
    ),
    (
        "sample-not-lowest-terms",
        set_at("paths", 1, "samples", ["2/6"]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]='2/6' is not 'p/q' ",
    ),
    (
        "sample-negative-fraction",
        set_at("paths", 1, "samples", ["-1/3"]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]='-1/3' is not 'p/q' ",
    ),
    (
        "sample-fraction-beyond-float64",
        set_at("paths", 1, "samples", [str(10**309)]),
        r"^SLA snapshot: paths\[1\]\.samples\[0\]='1000+' is not 'p/q' ",
    ),
    (
        "breached-not-bool",
        set_at("paths", 0, "breached", 1),
        r"^SLA snapshot: paths\[0\]\.breached=1 is not true or false$",
    ),
    (
        "over-but-healthy",
        edit(
            lambda s: s["paths"][0].update(violations="11", breached=False, breaches=1, recoveries=1, recovery_count=0)
        ),
        r"^SLA snapshot: paths\[0\]: 2 violations in the window exceed max_violations=1, so the path must be breached with "
        r"recovery_count 0, not breached=False recovery_count=0$",
    ),
    (
        "recovered-but-breached",
        edit(lambda s: s["paths"][0].update(violations="1", recovery_count=3)),
        r"^SLA snapshot: paths\[0\]\.recovery_count=3 is not below recovery_cycles=3 while the path is breached ",
    ),
    (
        "healthy-recovering",
        edit(lambda s: s["paths"][0].update(violations="", breached=False, recoveries=1, recovery_count=1)),
        r"^SLA snapshot: paths\[0\]\.recovery_count=1 is not 0 while the path is healthy$",
    ),
    (
        "counters",
        set_at("paths", 0, "recoveries", 1),
        r"^SLA snapshot: paths\[0\]: breaches=1 and recoveries=1 disagree with breached=True ",
    ),
]


@pytest.mark.parametrize("make, pattern", [case[1:] for case in BAD_SNAPSHOTS], ids=[case[0] for case in BAD_SNAPSHOTS])
def test_bad_snapshot_is_refused_and_changes_nothing(make, pattern):
    monitor = monitor_after(RUN[:2])
    before = copy.deepcopy(monitor.snapshot())
    with pytest.raises(SnapshotError, match=pattern) as caught:
        monitor.restore(make())
    assert isinstance(caught.value, ValueError) and "\n" not in str(caught.value)
    assert monitor.snapshot() == before and monitor.cycle == 2
