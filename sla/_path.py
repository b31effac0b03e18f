"""One SLA path's monitor: violations, the breach latch and its recovery, cycle by cycle.

The definitions, for a path with metric m, limit L, `window` W,
`max_violations` M, `recovery_cycles` R, `tokens` T and `statistic` S; the
cycles are numbered 1, 2, ... (one `update` each):

- the path *applies* in cycle t when T is None (every token) or the
  cycle's token is in T;
- the *sample* x_t is m's value in cycle t when the path applies and the
  value is a real number in [0, the largest float64], read exactly
  (`certfsm.sla._sample`; -0.0 is 0.0, a valid zero); otherwise there is
  none. A metric that is absent, None, NaN, infinite, negative (what a
  clock that stepped back measures) or beyond float64's range gives no
  sample;
- the *statistic* s_t is x_t for ``value``; for the windowed statistics it
  is taken over the samples of cycles t-W+1 .. t (those of cycles before
  the first do not exist): the nearest-rank percentile (the ceil(q n /
  100)-th smallest of n samples) or the exact mean;
- cycle t is a *violation* when the path applies and either it has no
  sample or s_t > L, where L is the exact decimal the spec wrote and the
  comparison is exact (a tie is within the SLA: metric <= limit). So a
  float sample s is within the limit exactly when s <= the largest
  float64 <= L: with L = 0.1 the float 0.1 (just above 1/10) is a
  violation and the float 0.3 (just below 3/10) is not;
- v_t is the number of violations among cycles t-W+1 .. t, and the path
  is *over* in cycle t when v_t > M;
- cycle t is *good* when it is neither a violation nor over;
- the path is *breached* in cycle t when it is over, or when it was
  breached in cycle t-1 and fewer than R consecutive good cycles end at
  t. It is not breached before cycle 1. So a breach starts in the very
  cycle the (M+1)-th violation of a window arrives, and the path is
  healthy again in the R-th consecutive good cycle after it (R = 0: as
  soon as it is no longer over); any violation during recovery starts
  the count again;
- a *breach* (counted in `breaches`) is a cycle that is breached after
  one that was not; a *recovery* (`recoveries`) the reverse.

A cycle where the path does not apply is never a violation and is good
unless the window is over: while the machine has fallen back to the
conservative token, a path scoped to other tokens recovers by itself,
after the violations leave its window and R more cycles.

Nothing here reads a clock or any state outside the path: a run is a
function of the (sample, token) sequence, so a replay reproduces it.
"""

from __future__ import annotations

import math
import numbers

from certfsm import SLA_STATISTICS, SlaPath, SpecError

from ._sample import Sample, limit_sides
from ._statistic import make_statistic
from ._status import PathStatus
from ._window import ViolationWindow


def check_path(path: SlaPath, index: int, known_tokens: frozenset[str] | None) -> None:
    """Refuse a path the monitor cannot run, as a spec would (the spec loader already checked spec paths).

    Paths built in code skip the spec's checks, so the monitor repeats the
    ones its logic relies on; `known_tokens` is the token set of the
    monitor, or None when it accepts any token name.
    """
    name = getattr(path, "name", None)
    where = f"sla path {name!r} (paths[{index}])" if isinstance(name, str) else f"paths[{index}]"

    def fail(text: str) -> SpecError:
        return SpecError(f"{where}: {text}")

    if not isinstance(name, str) or not name:
        raise fail(f"name={name!r} is not a non-empty string; give the path a name")
    if not isinstance(path.metric, str) or not path.metric:
        raise fail(f"metric={path.metric!r} is not a non-empty string; name the metric, e.g. 'latency_ms'")
    limit = path.limit
    if isinstance(limit, bool) or not isinstance(limit, numbers.Real) or not _is_finite(limit):
        raise fail(f"limit={limit!r} is not a finite number; give the largest acceptable value of {path.metric}")
    for field, lowest in (("window", 1), ("max_violations", 0), ("recovery_cycles", 0)):
        value = getattr(path, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise fail(f"{field}={value!r} is not an integer >= {lowest}; fix the path")
    if path.statistic not in SLA_STATISTICS:
        raise fail(f"statistic={path.statistic!r} is not one of {', '.join(SLA_STATISTICS)}; use one of those")
    tokens = path.tokens
    if tokens is None:
        return
    if isinstance(tokens, str) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise fail(f"tokens={tokens!r} is not a non-empty list of token names; list the tokens or give None for all")
    if known_tokens is not None:
        for k, token in enumerate(tokens):
            if token not in known_tokens:
                raise fail(
                    f"tokens[{k}]={token!r} is not a token of this monitor (known: {', '.join(sorted(known_tokens))}); "
                    "use one of those names"
                )


def _is_finite(number: numbers.Real) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an int or Fraction beyond float64's range: finite all the same
        return True


class PathMonitor:
    """The state of one path; `update` advances it by one cycle (see the module docstring).

    `sample_index` is where the monitor puts this path's metric in the
    samples of a cycle (one sample per distinct metric). For a ``value``
    path, `value_limit` is the largest float64 <= the limit (a float sample
    is within the limit exactly when it is <= this float) and
    `exact_limit` the limit itself, for the samples that are not floats.
    """

    __slots__ = (
        "path",
        "name",
        "metric",
        "every_token",
        "tokens",
        "statistic",
        "violations",
        "max_violations",
        "recovery_cycles",
        "breached",
        "recovery_count",
        "breaches",
        "recoveries",
        "applied",
        "value",
        "violated",
        "value_limit",
        "exact_limit",
        "sample_index",
    )

    def __init__(self, path: SlaPath, sample_index: int = 0) -> None:
        self.path, self.sample_index = path, sample_index
        self.name, self.metric = path.name, path.metric
        self.every_token = path.tokens is None
        self.tokens = frozenset(path.tokens or ())
        self.statistic = make_statistic(path.statistic, path.limit, path.window)
        self.exact_limit, value_limit = limit_sides(path.limit)
        self.value_limit = value_limit if path.statistic == "value" else None
        self.violations = ViolationWindow(path.window)
        self.max_violations = path.max_violations
        self.recovery_cycles = path.recovery_cycles
        self.breached = False
        self.recovery_count = 0
        self.breaches = 0
        self.recoveries = 0
        self.applied, self.violated = False, False  # of the last cycle, for `status`
        self.value: float | None = None

    def update(self, sample: Sample | None, token: str) -> PathStatus:
        """Advance one cycle with this cycle's sample (None: none) measured on the decision path `token`."""
        self.advance(sample, token)
        return self.status()

    def advance(self, sample: Sample | None, token: str) -> bool:
        """`update` without building the status (the runtime's call, every path every control cycle); returns
        `breached`.

        Two steps are written out here rather than called, because this runs
        once per path per control cycle and a call costs as much as the work:
        the ``value`` statistic (`ValueStatistic.observe`: the sample itself,
        exceeding when above the limit, a float compared with `value_limit`,
        any other sample with `exact_limit`) and `ViolationWindow.push` of this
        cycle's flag. The brute-force reference test of the monitor
        (tests/sla/test_sla_reference.py) checks both, cycle by cycle.
        """
        if self.every_token or token in self.tokens:
            applies = True
            limit = self.value_limit
            if limit is not None:
                if type(sample) is float:
                    statistic, violation = sample, sample > limit
                elif sample is None:
                    statistic, violation = None, True
                else:
                    statistic, violation = float(sample), sample > self.exact_limit
            else:
                statistic, exceeds = self.statistic.observe(sample)
                violation = sample is None or exceeds
        else:
            self.statistic.skip()
            applies, statistic, violation = False, None, False
        self.applied, self.value, self.violated = applies, statistic, violation
        window = self.violations
        position = window.position
        count = window.count = window.count + violation - window.flags[position]
        window.flags[position] = violation
        window.position = position + 1 if position + 1 < window.size else 0
        if count > self.max_violations:
            if not self.breached:
                self.breached = True
                self.breaches += 1
            self.recovery_count = 0
        elif self.breached:
            self.recovery_count = 0 if violation else self.recovery_count + 1
            if self.recovery_count >= self.recovery_cycles:
                self.breached = False
                self.recovery_count = 0
                self.recoveries += 1
        return self.breached

    def status(self) -> PathStatus:
        """The status after the last `advance`."""
        return PathStatus(
            self.name,
            self.applied,
            self.value,
            self.violated,
            self.violations.count,
            self.breached,
            self.recovery_count,
            self.breaches,
            self.recoveries,
        )

    def copy(self) -> PathMonitor:
        clone = PathMonitor.__new__(PathMonitor)
        for slot in PathMonitor.__slots__:
            setattr(clone, slot, getattr(self, slot))
        clone.statistic = self.statistic.copy()
        clone.violations = self.violations.copy()
        return clone
