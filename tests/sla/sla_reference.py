"""A brute-force SLA monitor: every cycle recomputed from the whole history, straight from the definitions.

It shares no code with `certfsm.sla`: every metric is read as the exact
rational it denotes (`Fraction` of the value; numpy numbers through their
integer ratio), a sample is one in [0, the largest float64] (NaN and the
infinities have no ratio; negatives and -inf are out of range; -0.0 is
the rational 0), every limit is the decimal of its ``str`` and every
comparison is between rationals; percentiles with `sorted` and a
rational ceiling, means with `Fraction`, the reported statistic the
float nearest the exact one, and the breach latch in closed form (no
recursion): a path is breached in cycle t when some cycle s <= t was
over and, for the last such s, no run of `recovery_cycles` consecutive
good cycles ends in s+1 .. t (for recovery_cycles = 0: t == s).
Quadratic in the length of the run, which is fine for an oracle.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np

PERCENTILES = {"p50": 50, "p95": 95, "p99": 99}
LARGEST = Fraction(sys.float_info.max)


def sample_of(value):
    """The exact rational a metric's value gives as a sample, or None when it gives none."""
    if value is None:
        return None
    if isinstance(value, np.integer):
        value = int(value)
    elif isinstance(value, np.floating):
        value = Fraction(*value.as_integer_ratio()) if np.isfinite(value) else math.nan
    try:
        x = Fraction(value)
    except (ValueError, OverflowError):  # NaN, an infinity
        return None
    return x if 0 <= x <= LARGEST else None


def limit_of(path):
    """The exact decimal the spec wrote: a float limit is the decimal its str spells (0.1 is 1/10)."""
    return Fraction(str(path.limit)) if isinstance(path.limit, float) else Fraction(path.limit)


def path_history(path, history):
    """Per cycle: (applies, statistic, violation, violations, breached, recovery_count, breaches, recoveries)."""
    count = len(history)
    applies = [path.tokens is None or token in path.tokens for _, token in history]
    samples = [sample_of(metrics.get(path.metric)) if applies[t] else None for t, (metrics, _) in enumerate(history)]
    statistic, violation = [], []
    limit = limit_of(path)
    for t in range(count):
        window = [x for x in samples[max(0, t - path.window + 1) : t + 1] if x is not None]
        if path.statistic == "value":
            exact = samples[t]
        elif not window:
            exact = None
        elif path.statistic == "mean":
            exact = sum(window) / len(window)
        else:
            rank = math.ceil(Fraction(PERCENTILES[path.statistic] * len(window), 100))
            exact = sorted(window)[rank - 1]
        exceeds = exact is not None and exact > limit
        statistic.append(float(exact) if applies[t] and exact is not None else None)
        violation.append(applies[t] and (samples[t] is None or exceeds))
    violations = [sum(violation[max(0, t - path.window + 1) : t + 1]) for t in range(count)]
    over = [v > path.max_violations for v in violations]
    good = [not violation[t] and not over[t] for t in range(count)]
    # run[u]: consecutive good cycles ending at u; an over cycle is not good, so after
    # the last over cycle s, run[u] never reaches back to s or before
    run = [0] * count
    for u in range(count):
        run[u] = (run[u - 1] + 1 if u else 1) if good[u] else 0
    breached = []
    for t in range(count):
        overs = [s for s in range(t + 1) if over[s]]
        if not overs:
            breached.append(False)
            continue
        s = overs[-1]
        recovered = any(run[u] >= path.recovery_cycles for u in range(s + 1, t + 1))
        breached.append(not recovered)
    rows = []
    for t in range(count):
        before = [False] + breached[: t + 1]
        breaches = sum(1 for u in range(1, t + 2) if before[u] and not before[u - 1])
        recoveries = sum(1 for u in range(1, t + 2) if before[u - 1] and not before[u])
        recovery_count = run[t] if breached[t] else 0
        rows.append(
            (applies[t], statistic[t], violation[t], violations[t], breached[t], recovery_count, breaches, recoveries)
        )
    return rows


def reference(paths, history):
    """Per cycle: (ok, one row per path as in `path_history`)."""
    per_path = [path_history(path, history) for path in paths]
    return [
        (not any(rows[t][4] for rows in per_path), tuple(rows[t] for rows in per_path)) for t in range(len(history))
    ]
