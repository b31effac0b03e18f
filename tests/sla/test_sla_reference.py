"""The monitor against a brute-force re-computation from the whole history, on every cycle.

Random paths (every statistic, token scopes, tight windows, limits that
samples hit exactly) and random metric sequences (missing, None, NaN,
infinities, -0.0, subnormals, values near float64's maximum whose sums
overflow a float) must give the reference's status on every cycle; the
same runs also pass through snapshot/restore (via JSON text) and `copy`
at random cycles, which must not change a single later status.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm._spec import SlaPath
from certfsm.sla import STATISTICS, SlaMonitor
from sla_reference import reference

TOKENS = ("A", "B", "C")
METRICS = ("m1", "m2")
LIMITS = (0.0, 1.0, 2.5, 3.0, 1e308)
# The limits, their float neighbours (a mean of L, L and next(L) rounds to L
# but exceeds it), sums that overflow float64, and every kind of missing value.
NEAR_LIMITS = [math.nextafter(x, direction) for x in LIMITS for direction in (-math.inf, math.inf)]
VALUES = st.one_of(
    st.sampled_from([*LIMITS, *NEAR_LIMITS, -0.0, 2.0, 4.0, 0.1, 0.2, 0.3, -1.0, 1.7976931348623157e308,
                     math.nan, math.inf, -math.inf, None, 1, 3]),
    st.floats(-10, 10),
)
MISSING = [None, math.nan, math.inf, -math.inf]


@st.composite
def sla_paths(draw, longest_window=8):
    count = draw(st.integers(1, 3))
    paths = []
    for k in range(count):
        window = draw(st.integers(1, longest_window))
        scoped = draw(st.booleans())
        tokens = tuple(t for t in TOKENS if draw(st.booleans())) if scoped else None
        paths.append(SlaPath(
            name=f"p{k}", metric=draw(st.sampled_from(METRICS)), limit=draw(st.sampled_from(LIMITS)),
            window=window, max_violations=draw(st.integers(0, window)),  # == window: never over
            recovery_cycles=draw(st.integers(0, 6)), tokens=tokens or None,
            statistic=draw(st.sampled_from(STATISTICS))))
    return paths


@st.composite
def histories(draw, paths, shortest=1, longest=40):
    """A run whose metric values come from a small palette, so that repeats and exact ties are common.

    The palette usually holds one path's limit and its two float
    neighbours: a mean of L, L and next(L) rounds to L yet exceeds it.
    """
    palette = draw(st.lists(VALUES, min_size=1, max_size=3)) + MISSING[:draw(st.integers(0, len(MISSING)))]
    if draw(st.booleans()):
        limit = draw(st.sampled_from([path.limit for path in paths]))
        palette += [limit, math.nextafter(limit, math.inf), math.nextafter(limit, -math.inf)]
    cycle = st.tuples(st.dictionaries(st.sampled_from(METRICS), st.sampled_from(palette), max_size=2),
                      st.sampled_from(TOKENS))
    return draw(st.lists(cycle, min_size=shortest, max_size=longest))


def observed(status):
    return status.ok, tuple((p.applies, p.statistic, p.violation, p.violations, p.breached, p.recovery_count,
                             p.breaches, p.recoveries) for p in status.paths)


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data(), paths=sla_paths(), restarts=st.sets(st.integers(0, 40), max_size=3),
       copies=st.sets(st.integers(0, 40), max_size=3))
def test_monitor_agrees_with_the_reference_on_every_cycle(data, paths, restarts, copies):
    check_against_reference(paths, data.draw(histories(paths), label="history"), restarts, copies)


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None)
@given(data=st.data(), paths=sla_paths(longest_window=64), restarts=st.sets(st.integers(0, 300), max_size=4),
       copies=st.sets(st.integers(0, 300), max_size=4))
def test_monitor_agrees_with_the_reference_on_long_runs_and_wide_windows(data, paths, restarts, copies):
    check_against_reference(paths, data.draw(histories(paths, shortest=100, longest=300), label="history"), restarts, copies)


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
