"""A brute-force SLA monitor: every cycle recomputed from the whole history, straight from the definitions.

It shares no code with `certfsm.sla`: samples are read with `float` and
`math.isfinite`, percentiles with `sorted` and a rational ceiling, means
with `Fraction`, and the breach latch in closed form (no recursion): a
path is breached in cycle t when some cycle s <= t was over and, for the
last such s, no run of `recovery_cycles` consecutive good cycles ends in
s+1 .. t (for recovery_cycles = 0: t == s). Quadratic in the length of
the run, which is fine for an oracle.
"""

from __future__ import annotations

import math
from fractions import Fraction

PERCENTILES = {"p50": 50, "p95": 95, "p99": 99}


def sample_of(value):
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def path_history(path, history):
    """Per cycle: (applies, statistic, violation, violations, breached, recovery_count, breaches, recoveries)."""
    count = len(history)
    applies = [path.tokens is None or token in path.tokens for _, token in history]
    samples = [sample_of(metrics.get(path.metric)) if applies[t] else None for t, (metrics, _) in enumerate(history)]
    statistic, violation = [], []
    limit = Fraction(path.limit)
    for t in range(count):
        window = [x for x in samples[max(0, t - path.window + 1):t + 1] if x is not None]
        if path.statistic == "value":
            value = samples[t]
            exceeds = value is not None and Fraction(value) > limit
        elif not window:
            value, exceeds = None, False
        elif path.statistic == "mean":
            mean = sum(Fraction(x) for x in window) / len(window)
            value, exceeds = float(mean), mean > limit
        else:
            rank = math.ceil(Fraction(PERCENTILES[path.statistic] * len(window), 100))
            value = sorted(window)[rank - 1]
            exceeds = value > path.limit
        statistic.append(value if applies[t] else None)
        violation.append(applies[t] and (samples[t] is None or exceeds))
    violations = [sum(violation[max(0, t - path.window + 1):t + 1]) for t in range(count)]
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
        before = [False] + breached[:t + 1]
        breaches = sum(1 for u in range(1, t + 2) if before[u] and not before[u - 1])
        recoveries = sum(1 for u in range(1, t + 2) if before[u - 1] and not before[u])
        recovery_count = run[t] if breached[t] else 0
        rows.append((applies[t], statistic[t], violation[t], violations[t], breached[t], recovery_count,
                     breaches, recoveries))
    return rows


def reference(paths, history):
    """Per cycle: (ok, one row per path as in `path_history`)."""
    per_path = [path_history(path, history) for path in paths]
    return [(not any(rows[t][4] for rows in per_path), tuple(rows[t] for rows in per_path))
            for t in range(len(history))]
