"""What an SLA path compares with its limit: this cycle's value, or a windowed percentile or mean.

Each statistic sees one entry per cycle: `observe(sample)` on a cycle
where the path applies (the sample may be None: the metric was missing),
`skip()` on any other cycle, so that a windowed statistic's window spans
the same `window` cycles as the path's violation count. `observe` returns
the statistic after this cycle's sample is in, and whether it exceeds the
limit; a statistic with no sample to speak of is None and exceeds nothing
(the monitor counts the missing metric as a violation by itself).

- ``value``: the sample itself; exceeds when sample > limit.
- ``p50``, ``p95``, ``p99``: the nearest-rank percentile of the samples of
  the last `window` cycles on which the path applied (`SortedWindow`).
- ``mean``: their exact arithmetic mean (`SumWindow`); the comparison with
  the limit is exact, the reported value correctly rounded.

The windowed statistics keep their samples, which a snapshot must carry;
``value`` keeps nothing.
"""

from __future__ import annotations

from ._window import SortedWindow, SumWindow, exact_units

STATISTICS = ("value", "p50", "p95", "p99", "mean")
"""Every statistic a path may name, as in the spec's ``sla.paths[*].statistic``."""

_PERCENTILES = {"p50": 50, "p95": 95, "p99": 99}


class ValueStatistic:
    """This cycle's sample against the limit; no state."""

    __slots__ = ("limit",)
    is_windowed = False

    def __init__(self, limit: float, window: int) -> None:
        self.limit = limit

    def observe(self, sample: float | None) -> tuple[float | None, bool]:
        return sample, sample is not None and sample > self.limit

    def skip(self) -> None:
        pass

    def entries(self) -> list[float | None]:
        return []

    def load(self, entries: list[float | None]) -> None:
        pass

    def copy(self) -> ValueStatistic:
        return self


class _Windowed:
    """What the windowed statistics share: the window of samples (`samples`) kept as snapshot entries."""

    __slots__ = ()
    is_windowed = True

    def skip(self) -> None:
        self.samples.push(None)

    def entries(self) -> list[float | None]:
        return self.samples.entries()

    def load(self, entries: list[float | None]) -> None:
        self.samples.load(entries)


class PercentileStatistic(_Windowed):
    """The nearest-rank q-th percentile of the window's samples against the limit."""

    __slots__ = ("limit", "q", "samples")

    def __init__(self, limit: float, window: int, q: int) -> None:
        self.limit, self.q, self.samples = limit, q, SortedWindow(window)

    def observe(self, sample: float | None) -> tuple[float | None, bool]:
        self.samples.push(sample)
        value = self.samples.percentile(self.q)
        return value, value is not None and value > self.limit

    def copy(self) -> PercentileStatistic:
        clone = PercentileStatistic.__new__(PercentileStatistic)
        clone.limit, clone.q, clone.samples = self.limit, self.q, self.samples.copy()
        return clone


class MeanStatistic(_Windowed):
    """The exact mean of the window's samples against the limit."""

    __slots__ = ("limit", "limit_units", "samples")

    def __init__(self, limit: float, window: int) -> None:
        self.limit, self.limit_units, self.samples = limit, exact_units(limit), SumWindow(window)

    def observe(self, sample: float | None) -> tuple[float | None, bool]:
        self.samples.push(sample)
        return self.samples.mean(), self.samples.mean_exceeds(self.limit_units)

    def copy(self) -> MeanStatistic:
        clone = MeanStatistic.__new__(MeanStatistic)
        clone.limit, clone.limit_units, clone.samples = self.limit, self.limit_units, self.samples.copy()
        return clone


def make_statistic(name: str, limit: float, window: int):
    """A fresh statistic `name` (one of `STATISTICS`) over `window` cycles against `limit`."""
    if name == "value":
        return ValueStatistic(limit, window)
    if name == "mean":
        return MeanStatistic(limit, window)
    return PercentileStatistic(limit, window, _PERCENTILES[name])
