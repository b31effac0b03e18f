"""The monitor against a brute-force re-computation from the whole history, on every cycle.

Random paths (every statistic, token scopes, tight windows, limits that
samples hit exactly, decimal limits such as 0.1 that no float equals) and
random metric sequences (missing, None, NaN, infinities, negatives, -0.0,
subnormals, values near float64's maximum whose sums overflow a float,
the float neighbours of each limit and its exact decimal as a Fraction or
Decimal, ints beyond float64's precision, numpy scalars) must give the
reference's status on every cycle; the
same runs also pass through snapshot/restore (via JSON text) and `copy`
at random cycles, which must not change a single later status.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import SLA_STATISTICS
from certfsm import SlaPath
from certfsm.sla import SlaMonitor
from sla_reference import reference

TOKENS = ("A", "B", "C")
METRICS = ("m1", "m2")
LIMITS = (0.0, 0.1, 0.3, 1.0, 2.5, 3.0, 1e308)
# The limits, their float neighbours (a mean of L, L and next(L) rounds to L
# but exceeds it), sums that overflow float64, values that are not floats
# (exact decimals, thirds, ints beyond 2**53, numpy scalars), and every kind of
# value that gives no sample.
NEAR_LIMITS = [math.nextafter(x, direction) for x in LIMITS for direction in (-math.inf, math.inf)]
NOT_FLOATS = [
    Fraction(1, 10),
    Fraction(3, 10),
    Fraction(1, 3),
    Decimal("0.1"),
    Decimal("2.5"),
    2**53 + 1,
    10**308,
    np.float32(0.1),
    np.int64(3),
    np.float64(0.3),
]
VALUES = st.one_of(
    st.sampled_from(
        [
            *LIMITS,
            *NEAR_LIMITS,
            *NOT_FLOATS,
            -0.0,
            2.0,
            4.0,
            0.2,
            -1.0,
            -5e-324,
            1.7976931348623157e308,
            math.nan,
            math.inf,
            -math.inf,
            None,
            1,
            3,
            -2,
            Fraction(-1, 10),
            Decimal("NaN"),
        ]
    ),
    st.floats(-10, 10),
)
MISSING = [None, math.nan, math.inf, -math.inf, -1.0]


@st.composite
def sla_paths(draw, longest_window=8, statistics=SLA_STATISTICS):
    count = draw(st.integers(1, 3))
    paths = []
    for k in range(count):
        window = draw(st.integers(1, longest_window))
        scoped = draw(st.booleans())
        tokens = tuple(t for t in TOKENS if draw(st.booleans())) if scoped else None
        paths.append(
            SlaPath(
                name=f"p{k}",
                metric=draw(st.sampled_from(METRICS)),
                limit=draw(st.sampled_from(LIMITS)),
                window=window,
                max_violations=draw(st.integers(0, window)),  # == window: never over
                recovery_cycles=draw(st.integers(0, 6)),
                tokens=tokens or None,
                statistic=draw(st.sampled_from(statistics)),
            )
        )
    return paths


@st.composite
def histories(draw, paths, shortest=1, longest=40):
    """A run whose metric values come from a small palette, so that repeats and exact ties are common.

    The palette usually holds one path's limit and its two float
    neighbours: a mean of L, L and next(L) rounds to L yet exceeds it.
    """
    palette = draw(st.lists(VALUES, min_size=1, max_size=3)) + MISSING[: draw(st.integers(0, len(MISSING)))]
    if draw(st.booleans()):
        limit = draw(st.sampled_from([path.limit for path in paths]))
        exact = Fraction(str(limit))
        palette += [
            limit,
            math.nextafter(limit, math.inf),
            math.nextafter(limit, -math.inf),
            draw(
                st.sampled_from([exact, Decimal(str(limit)), exact + Fraction(1, 10**30), exact - Fraction(1, 10**30)])
            ),
        ]
    cycle = st.tuples(
        st.dictionaries(st.sampled_from(METRICS), st.sampled_from(palette), max_size=2), st.sampled_from(TOKENS)
    )
    return draw(st.lists(cycle, min_size=shortest, max_size=longest))


def observed(status):
    return status.ok, tuple(
        (p.applies, p.statistic, p.violation, p.violations, p.breached, p.recovery_count, p.breaches, p.recoveries)
        for p in status.paths
    )


@settings(max_examples=examples(100), deadline=None)
@given(
    data=st.data(),
    paths=sla_paths(),
    restarts=st.sets(st.integers(0, 40), max_size=3),
    copies=st.sets(st.integers(0, 40), max_size=3),
)
def test_monitor_agrees_with_the_reference_on_every_cycle(data, paths, restarts, copies):
    check_against_reference(paths, data.draw(histories(paths), label="history"), restarts, copies)


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None)
@given(
    data=st.data(),
    paths=sla_paths(longest_window=64),
    restarts=st.sets(st.integers(0, 300), max_size=4),
    copies=st.sets(st.integers(0, 300), max_size=4),
)
def test_monitor_agrees_with_the_reference_on_long_runs_and_wide_windows(data, paths, restarts, copies):
    check_against_reference(
        paths, data.draw(histories(paths, shortest=100, longest=300), label="history"), restarts, copies
    )


def check_against_reference(paths, history, restarts, copies):
    expected = reference(paths, history)
    monitor = SlaMonitor(paths, tokens=TOKENS)
    for t, (metrics, token) in enumerate(history):
        if t in restarts:
            restored = SlaMonitor(paths, tokens=TOKENS)
            restored.restore(json.loads(json.dumps(monitor.snapshot(), allow_nan=False)))
            assert restored.snapshot() == monitor.snapshot()
            monitor = restored
        if t in copies:
            original, monitor = monitor, monitor.copy()
            original.update({"m1": math.nan, "m2": None}, "A")  # the copy must not share any state
        status = monitor.update(metrics, token)
        assert status.cycle == t + 1
        assert observed(status) == expected[t], f"cycle {t + 1}"
        assert monitor.ok == status.ok


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data(), paths=sla_paths())
def test_update_ok_is_the_ok_of_update_with_the_same_state_change(data, paths):
    """The runtime's per-cycle `update_ok` builds no statuses; its verdict and the state it leaves are `update`'s."""
    history = data.draw(histories(paths), label="history")
    expected = reference(paths, history)
    lean, full = SlaMonitor(paths, tokens=TOKENS), SlaMonitor(paths, tokens=TOKENS)
    for t, (metrics, token) in enumerate(history):
        assert lean.update_ok(metrics, token) == full.update(metrics, token).ok == expected[t][0], f"cycle {t + 1}"
        assert lean.snapshot() == full.snapshot()


@settings(max_examples=examples(200), deadline=None)
@given(
    data=st.data(),
    paths=st.one_of(sla_paths(), sla_paths(statistics=("value",))),
    tokens=st.sampled_from([TOKENS, None]),
)
def test_update_ok_and_update_interleaved_keep_every_status_of_the_reference(data, paths, tokens):
    """`update_ok` decides a good cycle of a quiet monitor by comparisons alone (`SlaMonitor._quiet`); an `update`
    after any number of such cycles must still report the reference's full status, and the state must be the one
    a monitor driven by `update` alone reaches. Monitors that accept any token name (tokens None) are checked too."""
    history = data.draw(histories(paths, longest=60), label="history")
    lean_cycles = data.draw(st.sets(st.integers(0, len(history) - 1)), label="cycles decided by update_ok")
    expected = reference(paths, history)
    mixed, full = SlaMonitor(paths, tokens=tokens), SlaMonitor(paths, tokens=tokens)
    for t, (metrics, token) in enumerate(history):
        status = full.update(metrics, token)
        assert observed(status) == expected[t], f"cycle {t + 1}"
        if t in lean_cycles:
            assert mixed.update_ok(metrics, token) == status.ok, f"cycle {t + 1}"
        else:
            assert observed(mixed.update(metrics, token)) == expected[t], f"cycle {t + 1}"
        assert mixed.snapshot() == full.snapshot() and mixed.cycle == full.cycle == t + 1
        assert mixed.copy().snapshot() == full.snapshot()


def test_quiet_cycles_then_violations_breach_and_recovery_match_the_reference():
    """Long quiet stretches (decided without advancing the windows) around violations, a breach and its recovery:
    every verdict of `update_ok` and the statuses of a later `update` are the reference's."""
    paths = [
        SlaPath(name="latency", metric="m1", limit=2.5, window=4, max_violations=1, recovery_cycles=6),
        SlaPath(name="int4", metric="m2", limit=1.0, window=3, max_violations=0, recovery_cycles=0, tokens=("B",)),
    ]
    good, bad = {"m1": 2.5, "m2": 1.0}, {"m1": math.nextafter(2.5, math.inf), "m2": 1.0}
    history = (
        [(good, "A")] * 20
        + [(bad, "A"), ({"m1": 1.0}, "A"), ({"m1": -math.inf, "m2": 0.5}, "C")]
        + [(good, "B")] * 10
        + [({"m1": 0.0, "m2": math.nan}, "B")]
        + [(good, "A")] * 10
        + [({"m1": 1, "m2": 0.0}, "A"), (good, "C")]  # an int sample: not the shortcut's float, same meaning
        + [({"m1": -math.inf}, "A")] * 2
        + [(good, "A")] * 8
    )  # -inf is missing: two violations, a breach
    expected = reference(paths, history)
    assert any(not ok for ok, _ in expected) and expected[-1][0], "the run must breach and recover"
    monitor = SlaMonitor(paths, tokens=TOKENS)
    for t, (metrics, token) in enumerate(history):
        assert monitor.update_ok(metrics, token) == expected[t][0], f"cycle {t + 1}"
    probe = monitor.copy()
    assert observed(probe.update(good, "A")) == reference(paths, [*history, (good, "A")])[-1]


def test_a_refused_update_changes_nothing_on_the_quiet_shortcut_either():
    """A quiet monitor still refuses an unknown or unhashable token and a non-numeric metric, changing nothing."""
    monitor = SlaMonitor(
        [SlaPath(name="p", metric="m1", limit=1.0, window=2, max_violations=0, recovery_cycles=1)], tokens=TOKENS
    )
    assert monitor.update_ok({"m1": 0.5}, "A") and monitor.update_ok({"m1": 0.5}, "A")
    before = monitor.snapshot()
    for metrics, token, error in (
        ({"m1": 0.5}, "Z", ValueError),
        ({"m1": 0.5}, ["A"], TypeError),
        ({"m1": "0.5"}, "A", TypeError),
        ([("m1", 0.5)], "A", TypeError),
    ):
        with pytest.raises(error):
            monitor.update_ok(metrics, token)
        assert monitor.snapshot() == before
