"""What a metric gives a path, and the exact comparison with a decimal limit, through `update` and `update_ok` alike.

A sample is a real number from 0 up to float64's largest, read exactly;
NaN, infinities, negatives (a clock that stepped back) and values beyond
float64 give none, and the cycle is a violation for every statistic
without touching the window. -0.0 equals 0.0: a valid zero latency. A
limit is the decimal the spec wrote, so a float sample s is within it
exactly when s <= the largest float64 <= the decimal: the float 0.1 is
above the limit 0.1, the float 0.3 below the limit 0.3.
"""

from __future__ import annotations

import json
import math
import numbers
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from certfsm import SLA_STATISTICS
from certfsm import SlaPath
from certfsm.sla import SlaMonitor
from certfsm.sla._sample import read_metric
from sla_reference import reference

TOKENS = ("KEEP", "INT4")
TINY = Fraction(1, 10**40)
NO_SAMPLE = [
    None,
    math.nan,
    -math.nan,
    math.inf,
    -math.inf,
    -1.0,
    -5e-324,
    -1,
    -(10**400),
    Fraction(-1, 10),
    Decimal("-0.1"),
    Decimal("NaN"),
    Decimal("sNaN"),
    Decimal("Infinity"),
    Decimal("-Infinity"),
    np.float64(-2.0),
    np.float32("nan"),
    np.int64(-3),
    10**400,
    Fraction(10**400, 3),
    Fraction(sys.float_info.max) + TINY,
]  # just beyond float64's largest, though float() rounds it down


def path(**fields) -> SlaPath:
    base = dict(name="lat", metric="latency_ms", limit=10.0, window=1, max_violations=0, recovery_cycles=0)
    base.update(fields)
    return SlaPath(**base)


def canonical_kind(sample):
    return (type(sample), sample, math.copysign(1, sample) if type(sample) is float else None)


def exact_of(value) -> Fraction:
    """The rational a test value denotes (numpy numbers through float or int, which hold them exactly here)."""
    if isinstance(value, np.integer):
        return Fraction(int(value))
    if isinstance(value, np.floating):
        return Fraction(float(value))
    return Fraction(value)


def observed(status):
    return status.ok, tuple(
        (p.applies, p.statistic, p.violation, p.violations, p.breached, p.recovery_count, p.breaches, p.recoveries)
        for p in status.paths
    )


# ---------------------------------------------------------------- reading a metric


class Inexact:
    """A real number type that offers no exact ratio: refused rather than rounded."""

    def __float__(self) -> float:
        return 0.5

    def __repr__(self) -> str:
        return "Inexact()"


numbers.Real.register(Inexact)


@pytest.mark.parametrize(
    "value, sample",
    [
        (0.5, 0.5),
        (-0.0, 0.0),
        (0.0, 0.0),
        (0, 0.0),
        (3, 3.0),
        (np.int64(7), 7.0),
        (np.float64(0.25), 0.25),
        (np.float32(0.1), float(np.float32(0.1))),
        (Fraction(1, 2), 0.5),
        (Decimal("0.5"), 0.5),
        (Decimal("-0"), 0.0),
        (Fraction(1, 3), Fraction(1, 3)),
        (Decimal("0.1"), Fraction(1, 10)),
        (2**53 + 1, Fraction(2**53 + 1)),
        (np.int64(2**53 + 1), Fraction(2**53 + 1)),
        (1.7976931348623157e308, 1.7976931348623157e308),
        (5e-324, 5e-324),
    ],
    ids=repr,
)
def test_a_real_number_is_read_exactly_as_a_float_when_one_equals_it_else_a_fraction(value, sample):
    assert canonical_kind(read_metric("m", value)) == canonical_kind(sample)


def test_a_long_double_keeps_its_exact_value():
    third = np.longdouble(1) / np.longdouble(3)
    exact = Fraction(*third.as_integer_ratio())
    assert read_metric("m", third) == exact
    assert type(read_metric("m", third)) is (float if exact == float(exact) else Fraction)


@pytest.mark.parametrize("value", NO_SAMPLE, ids=repr)
def test_nan_infinities_negatives_and_values_beyond_float64_give_no_sample(value):
    assert read_metric("m", value) is None


@pytest.mark.parametrize(
    "value, pattern",
    [
        (
            "0.5",
            r"^metrics\['m'\]='0\.5' is a str, not a number; give a float, or None when the metric was not measured$",
        ),
        (True, r"^metrics\['m'\]=True is a bool, not a number; "),
        (np.bool_(False), r"^metrics\['m'\]=np\.False_ is a bool, not a number; "),
        (1j, r"^metrics\['m'\]=1j is a complex, not a number; "),
        ([0.5], r"^metrics\['m'\]=\[0\.5\] is a list, not a number; "),
        (
            Inexact(),
            r"^metrics\['m'\]=Inexact\(\) is a Inexact, a number that cannot be read exactly; give a float, "
            r"an int, a Fraction or a Decimal$",
        ),
    ],
    ids=["str", "bool", "numpy-bool", "complex", "list", "real-without-a-ratio"],
)
def test_what_is_not_a_number_is_refused(value, pattern):
    with pytest.raises(TypeError, match=pattern):
        read_metric("m", value)


# ---------------------------------------------------------------- no sample: a violation, for every statistic


@pytest.mark.parametrize("statistic", SLA_STATISTICS)
@pytest.mark.parametrize("value", NO_SAMPLE, ids=repr)
def test_a_value_without_a_sample_is_a_violation_for_every_statistic(statistic, value):
    monitor = SlaMonitor([path(statistic=statistic)], tokens=TOKENS)
    status = monitor.update({"latency_ms": value}, "INT4")
    assert status.paths[0].violation and not status.ok and status.paths[0].statistic is None


@pytest.mark.parametrize("statistic", SLA_STATISTICS)
@pytest.mark.parametrize("value", [-1.0, -5e-324, -math.inf, math.nan, math.inf, -1, Fraction(-1, 3)], ids=repr)
def test_update_ok_of_a_quiet_monitor_counts_it_too(statistic, value):
    """The quiet shortcut of `update_ok` must not let a negative, NaN or infinite float through as within the limit."""
    lean, full = (SlaMonitor([path(statistic=statistic, window=3, max_violations=1)], tokens=TOKENS) for _ in range(2))
    for metrics in ({"latency_ms": 1.0}, {"latency_ms": 2.0}, {"latency_ms": value}, {"latency_ms": value}):
        assert lean.update_ok(metrics, "INT4") == full.update(metrics, "INT4").ok
        assert lean.snapshot() == full.snapshot()
    assert full.snapshot()["paths"][0]["violations"] == "11" and not lean.ok


@pytest.mark.parametrize("statistic, expected", [("mean", 5.0), ("p50", 4.0), ("p99", 6.0)])
def test_a_negative_or_nan_sample_leaves_the_windowed_statistics_as_if_it_were_absent(statistic, expected):
    for bad in (-100.0, math.nan, -math.inf, math.inf, Fraction(-1, 2)):
        monitor = SlaMonitor([path(statistic=statistic, window=3, max_violations=3)], tokens=TOKENS)
        statuses = [monitor.update({"latency_ms": value}, "INT4") for value in (4.0, bad, 6.0)]
        assert [s.paths[0].violation for s in statuses] == [False, True, False], bad
        assert statuses[-1].paths[0].statistic == expected, bad
        assert monitor.snapshot()["paths"][0]["samples"] == [4.0, None, 6.0]


# ---------------------------------------------------------------- -0.0 and the exact boundary


@pytest.mark.parametrize("statistic", SLA_STATISTICS)
def test_negative_zero_is_a_valid_zero_latency(statistic):
    """-0.0 == 0.0: within a limit of 0, never a violation, reported and kept as 0.0."""
    monitor = SlaMonitor([path(statistic=statistic, limit=0.0, window=2)], tokens=TOKENS)
    for update in (monitor.update_ok, lambda m, t: monitor.update(m, t).ok):
        assert update({"latency_ms": -0.0}, "INT4")
    status = monitor.update({"latency_ms": -0.0}, "INT4").paths[0]
    assert not status.violation and math.copysign(1, status.statistic) == 1
    least = SlaMonitor([path(statistic=statistic, limit=0.0)], tokens=TOKENS)
    assert not least.update({"latency_ms": 5e-324}, "INT4").ok  # the least positive float is above 0


BOUNDARY = [
    # limit, sample, within the limit (as the decimals say)
    (0.1, 0.1, False),  # the float 0.1 is 0.1000000000000000055...
    (0.1, math.nextafter(0.1, 0), True),
    (0.1, Fraction(1, 10), True),
    (0.1, Decimal("0.1"), True),
    (0.1, Fraction(1, 10) + TINY, False),
    (0.1, Decimal("0.1000000000000000000000000000001"), False),
    (0.3, 0.3, True),  # the float 0.3 is 0.2999999999999999888...
    (0.3, math.nextafter(0.3, math.inf), False),
    (0.3, Fraction(3, 10), True),
    (0.3, Fraction(3, 10) + TINY, False),
    (0.3, np.float64(0.3), True),
    (0.3, np.float32(0.3), False),  # float32(0.3) is 0.30000001192...
    (1e308, 1e308, False),
    (1e308, math.nextafter(1e308, 0), True),
    (1e308, 10**308, True),
    (1e308, 10**308 + 1, False),
    (10.0, 10, True),
    (10.0, 11, False),
    (10.0, np.int64(10), True),
    (10.0, Fraction(10) + TINY, False),
    (9007199254740992.0, 2**53, True),
    (9007199254740992.0, 2**53 + 1, False),  # float(2**53 + 1) == 2**53
    (0.0, 0, True),
    (0.0, TINY, False),
    (1.7976931348623157e308, 1.7976931348623157e308, False),
    (Fraction(1, 3), float(Fraction(1, 3)), True),
    (Fraction(1, 3), Fraction(1, 3), True),
    (Fraction(1, 3), math.nextafter(float(Fraction(1, 3)), 1), False),
]


@pytest.mark.parametrize("statistic", SLA_STATISTICS)
@pytest.mark.parametrize("limit, sample, within", BOUNDARY, ids=repr)
def test_a_sample_is_within_a_limit_exactly_as_the_decimals_say(statistic, limit, sample, within):
    """A window of one makes every statistic the sample itself; `update` and `update_ok` agree with the decimals."""
    paths = [path(statistic=statistic, limit=limit)]
    full, lean = SlaMonitor(paths, tokens=TOKENS), SlaMonitor(paths, tokens=TOKENS)
    history = [({"latency_ms": 0.0}, "INT4"), ({"latency_ms": sample}, "INT4")]
    expected = reference(paths, history)
    assert expected[-1][0] == within  # the reference agrees with the table
    for metrics, token in history:
        assert lean.update_ok(metrics, token) == full.update(metrics, token).ok
    assert lean.ok == full.ok == within and lean.snapshot() == full.snapshot()
    again = SlaMonitor(paths, tokens=TOKENS)
    last = [again.update(metrics, token) for metrics, token in history][-1].paths[0]
    assert last.violation != within and last.statistic == float(exact_of(sample))


def test_a_spec_limit_means_the_decimal_written():
    """Through a spec document as an artifact stores it: "limit": 0.1 is 1/10, which the float 0.1 exceeds."""
    document = json.loads(
        '{"outputs": ["KEEP", "INT4"], "sla": {"paths": [{"name": "lat", "metric": "latency_ms", '
        '"limit": 0.1, "window": 1, "max_violations": 0, "recovery_cycles": 0}]}}'
    )
    for sample, within in ((0.1, False), (math.nextafter(0.1, 0), True), (Fraction(1, 10), True)):
        for update in ("update_ok", "update"):
            monitor = SlaMonitor.from_document(document)
            verdict = getattr(monitor, update)({"latency_ms": sample}, "INT4")
            assert (verdict if update == "update_ok" else verdict.ok) == within, (sample, update)


@pytest.mark.parametrize(
    "samples, within",
    [
        ((0.3, math.nextafter(0.3, math.inf)), False),  # the exact mean 0.30000000000000001665... is above 3/10
        ((0.1, 0.5), False),  # the float 0.1 is above 1/10, so the mean is above 3/10, though it rounds to 0.3
        ((Decimal("0.1"), Decimal("0.5")), True),
        ((Fraction(1, 10), 0.5), True),
        ((0.3, Fraction(3, 10)), True),
        ((Fraction(3, 10), Fraction(3, 10)), True),
        ((Fraction(3, 10), Fraction(3, 10) + TINY), False),
    ],
)
def test_the_mean_is_compared_with_the_decimal_exactly(samples, within):
    paths = [path(statistic="mean", limit=0.3, window=2, max_violations=1)]
    history = [({"latency_ms": value}, "INT4") for value in samples]
    monitor = SlaMonitor(paths, tokens=TOKENS)
    last = [monitor.update(metrics, token) for metrics, token in history][-1]
    exact = sum(exact_of(v) for v in samples) / 2
    assert (not last.paths[0].violation) == within == (exact <= Fraction(3, 10))
    assert last.paths[0].statistic == float(exact)
    assert observed(last) == reference(paths, history)[-1]


# ---------------------------------------------------------------- interleaved, snapshots


def test_update_ok_and_update_interleaved_agree_on_every_kind_of_sample():
    """Quiet stretches decided by comparisons alone, then each kind of sample, then quiet again: the verdicts, the
    reported statuses of `update` and the state are the reference's and those of a monitor driven by `update` only."""
    paths = [
        path(limit=0.1, window=3, max_violations=1, recovery_cycles=2),
        path(name="int4", limit=0.3, window=2, max_violations=0, recovery_cycles=1, tokens=("INT4",)),
    ]
    kinds = [
        0.1,
        math.nextafter(0.1, 0),
        Fraction(1, 10),
        -0.0,
        -1.0,
        math.nan,
        math.inf,
        -math.inf,
        0.3,
        2,
        Decimal("0.1"),
        np.float64(-0.5),
        Fraction(1, 10) + TINY,
        None,
        np.float32(0.05),
    ]
    history = []
    for kind in kinds:
        history += [({"latency_ms": 0.05}, "INT4")] * 4 + [({"latency_ms": kind}, token) for token in TOKENS]
    history += [({"latency_ms": 0.05}, "KEEP")] * 4
    expected = reference(paths, history)
    assert any(not ok for ok, _ in expected) and expected[-1][0]
    mixed, full = SlaMonitor(paths, tokens=TOKENS), SlaMonitor(paths, tokens=TOKENS)
    for t, (metrics, token) in enumerate(history):
        status = full.update(metrics, token)
        assert observed(status) == expected[t], f"cycle {t + 1}"
        if t % 3:
            assert mixed.update_ok(metrics, token) == status.ok, f"cycle {t + 1}"
        else:
            assert mixed.update(metrics, token) == status, f"cycle {t + 1}"
        assert mixed.snapshot() == full.snapshot(), f"cycle {t + 1}"


@pytest.mark.parametrize("statistic", ["p50", "mean"])
def test_samples_that_are_not_floats_survive_a_snapshot_exactly(statistic):
    paths = [path(statistic=statistic, limit=0.1, window=4, max_violations=3)]
    monitor = SlaMonitor(paths, tokens=TOKENS)
    for value in (Fraction(1, 10), 2**53 + 1, Decimal("0.3"), 0.5):
        monitor.update({"latency_ms": value}, "INT4")
    snapshot = monitor.snapshot()
    assert snapshot["paths"][0]["samples"] == ["1/10", "9007199254740993", "3/10", 0.5]
    restored = SlaMonitor(paths, tokens=TOKENS)
    restored.restore(snapshot)
    assert restored.snapshot() == snapshot
    for value in (Fraction(1, 10), 0.0, 0.0, 0.0):  # the old samples leave; the statistic comes down to 1/10, then 0
        assert restored.update({"latency_ms": value}, "INT4") == monitor.update({"latency_ms": value}, "INT4")
    assert restored.snapshot() == monitor.snapshot()


def test_limits_that_differ_below_float_resolution_have_different_fingerprints():
    third, near = SlaMonitor([path(limit=Fraction(1, 3))]), SlaMonitor([path(limit=Fraction(1, 3) + TINY)])
    assert third._fingerprint != near._fingerprint
    plain, integral = SlaMonitor([path(limit=10.0)]), SlaMonitor([path(limit=10)])
    assert plain._fingerprint == integral._fingerprint  # the same decimal


@pytest.mark.parametrize("statistic", SLA_STATISTICS)
def test_limits_beyond_float64_are_exact_too(statistic):
    """A limit built in code may exceed float64's range: every sample is within 10**400, none within -10**400."""
    high = SlaMonitor([path(statistic=statistic, limit=10**400)], tokens=TOKENS)
    low = SlaMonitor([path(statistic=statistic, limit=-(10**400))], tokens=TOKENS)
    for value in (0.0, 1.7976931348623157e308, 10**308, Fraction(1, 3)):
        assert high.update_ok({"latency_ms": value}, "INT4") and high.update({"latency_ms": value}, "INT4").ok
        assert not low.update_ok({"latency_ms": value}, "INT4") and not low.update({"latency_ms": value}, "INT4").ok
