"""What an SLA path compares with its limit: this cycle's value, or a windowed percentile or mean.

Each statistic sees one entry per cycle: `observe(sample)` on a cycle
where the path applies (the sample may be None: the metric gave none),
`skip()` on any other cycle, so that a windowed statistic's window spans
the same `window` cycles as the path's violation count. `observe` returns
the statistic after this cycle's sample is in (as the float64 nearest it,
for the report) and whether it exceeds the limit, decided exactly; a
statistic with no sample to speak of is None and exceeds nothing (the
monitor counts the cycle without a sample as a violation by itself, and
the window never holds it, so a NaN or a negative cannot poison a sum).

The limit is the exact decimal the spec wrote (`certfsm.sla._sample`):
each statistic computes its sides once, when it is built, and compares a
float statistic with the largest float64 <= the limit, any other with the
limit itself.

- ``value``: the sample itself; exceeds when sample > limit.
- ``p50``, ``p95``, ``p99``: the nearest-rank percentile of the samples of
  the last `window` cycles on which the path applied (`SortedWindow`).
- ``mean``: their exact arithmetic mean (`SumWindow`); the comparison with
  the limit is exact, the reported value correctly rounded.

The windowed statistics keep their samples, which a snapshot must carry;
``value`` keeps nothing.
"""

from __future__ import annotations

from typing import Generic, TypeVar, Union

from ._sample import Sample, exceeds, limit_sides
from ._window import SampleWindow, SortedWindow, SumWindow, limit_in_units

_W = TypeVar("_W", bound=SampleWindow)


_PERCENTILES = {"p50": 50, "p95": 95, "p99": 99}


class ValueStatistic:
    """This cycle's sample against the limit; no state."""

    __slots__ = ("limit", "exact_limit", "at_most")
    is_windowed = False

    def __init__(self, limit: float, window: int) -> None:
        self.limit = limit
        self.exact_limit, self.at_most = limit_sides(limit)

    def observe(self, sample: Sample | None) -> tuple[float | None, bool]:
        if sample is None:
            return None, False
        return float(sample), exceeds(sample, self.at_most, self.exact_limit)

    def skip(self) -> None:
        pass

    def entries(self) -> list[Sample | None]:
        return []

    def load(self, entries: list[Sample | None]) -> None:
        pass

    def copy(self) -> ValueStatistic:
        return self


class _Windowed(Generic[_W]):
    """What the windowed statistics share: the window of samples (`samples`) kept as snapshot entries."""

    __slots__ = ()
    is_windowed = True
    samples: _W  # a slot of each subclass

    def skip(self) -> None:
        self.samples.push(None)

    def entries(self) -> list[Sample | None]:
        return self.samples.entries()

    def load(self, entries: list[Sample | None]) -> None:
        self.samples.load(entries)


class PercentileStatistic(_Windowed[SortedWindow]):
    """The nearest-rank q-th percentile of the window's samples against the limit."""

    __slots__ = ("limit", "exact_limit", "at_most", "q", "samples")

    def __init__(self, limit: float, window: int, q: int) -> None:
        self.limit, self.q, self.samples = limit, q, SortedWindow(window)
        self.exact_limit, self.at_most = limit_sides(limit)

    def observe(self, sample: Sample | None) -> tuple[float | None, bool]:
        self.samples.push(sample)
        value = self.samples.percentile(self.q)
        if type(value) is float:  # `exceeds` written out: this runs every cycle
            return value, value > self.at_most
        if value is None:
            return None, False
        return float(value), value > self.exact_limit

    def copy(self) -> PercentileStatistic:
        clone = PercentileStatistic.__new__(PercentileStatistic)
        clone.limit, clone.exact_limit, clone.at_most = self.limit, self.exact_limit, self.at_most
        clone.q, clone.samples = self.q, self.samples.copy()
        return clone


class MeanStatistic(_Windowed[SumWindow]):
    """The exact mean of the window's samples against the limit."""

    __slots__ = ("limit", "limit_units", "samples")

    def __init__(self, limit: float, window: int) -> None:
        self.limit, self.samples = limit, SumWindow(window)
        self.limit_units = limit_in_units(limit_sides(limit)[0])

    def observe(self, sample: Sample | None) -> tuple[float | None, bool]:
        self.samples.push(sample)
        return self.samples.mean(), self.samples.mean_exceeds(*self.limit_units)

    def copy(self) -> MeanStatistic:
        clone = MeanStatistic.__new__(MeanStatistic)
        clone.limit, clone.limit_units, clone.samples = self.limit, self.limit_units, self.samples.copy()
        return clone


Statistic = Union[ValueStatistic, PercentileStatistic, MeanStatistic]
"""What a path compares with its limit; `make_statistic` builds one."""


def make_statistic(name: str, limit: float, window: int) -> Statistic:
    """A fresh statistic `name` (one of `certfsm.SLA_STATISTICS`) over `window` cycles against `limit` (a spec number:
    the exact decimal it denotes)."""
    if name == "value":
        return ValueStatistic(limit, window)
    if name == "mean":
        return MeanStatistic(limit, window)
    return PercentileStatistic(limit, window, _PERCENTILES[name])
