"""What a probe measures: the `HardwareProbe` interface and the `ProbeSample` it returns.

A sample holds *quantities*: named measurements in fixed units. The
names below are the vocabulary every hardware probe speaks, so that a
calibration file (`certfsm.runtime._calibration`) can say which quantity
feeds which input of a spec, whatever the spec calls its inputs:

============  ======================================================
quantity      meaning and unit
============  ======================================================
compute_util  share of compute time busy, % (0..100)
mem_bw_used   memory bandwidth in use, bytes/s
mem_bw_peak   the memory system's peak bandwidth, bytes/s
mem_bw_util   100 * mem_bw_used / mem_bw_peak, %
mem_used      memory capacity in use, bytes (capacity, not bandwidth)
mem_total     memory capacity, bytes
mem_util      100 * mem_used / mem_total, %
lK_miss_rate  share of accesses to cache level K that miss, % (l1, l2, l3)
temperature   the hottest sensor, degC
queue_depth   work waiting or running, count
============  ======================================================

A probe that cannot measure a quantity reports it as missing (None);
missing is never an error, because the runtime turns it into the
envelope fallback. A sample may also carry quantities outside this
vocabulary (a trace probe names them after its CSV columns) and
*metrics*: figures such as ``latency_ms`` that feed the SLA monitor, not
the controller.

Standard library only: the runtime's scalar path runs without numpy.
"""

from __future__ import annotations

import abc
import math
import numbers
from dataclasses import dataclass, field
from typing import Mapping, Self

from certfsm import ReadOnlyDict

COMPUTE_UTIL = "compute_util"
MEM_BW_USED = "mem_bw_used"
MEM_BW_PEAK = "mem_bw_peak"
MEM_BW_UTIL = "mem_bw_util"
MEM_USED = "mem_used"
MEM_TOTAL = "mem_total"
MEM_UTIL = "mem_util"
TEMPERATURE = "temperature"
QUEUE_DEPTH = "queue_depth"
CACHE_LEVELS = (1, 2, 3)


def cache_miss_quantity(level: int) -> str:
    """The quantity name of cache level `level`'s miss rate: ``l2_miss_rate`` for level 2."""
    return f"l{level}_miss_rate"


STANDARD_QUANTITIES = frozenset(
    (COMPUTE_UTIL, MEM_BW_USED, MEM_BW_PEAK, MEM_BW_UTIL, MEM_USED, MEM_TOTAL, MEM_UTIL, TEMPERATURE, QUEUE_DEPTH)
    + tuple(cache_miss_quantity(level) for level in CACHE_LEVELS)
)
"""Every quantity a hardware probe speaks of (the table above)."""


def percent(part: float | None, whole: float | None) -> float | None:
    """100 * part / whole, or None (missing) when either is missing or whole is not positive."""
    if part is None or whole is None or not whole > 0:
        return None
    return 100.0 * part / whole


class _ReadOnlyValues(ReadOnlyDict):
    refusal = "a ProbeSample mapping is read-only; build a new sample with dataclasses.replace"


def _measurements(values: Mapping[str, object], what: str) -> _ReadOnlyValues:
    """`values` as a read-only name -> float-or-None mapping; a name that is not a string or a value that is not a real number is a TypeError."""
    checked = {}
    for name, value in dict(values).items():
        if not isinstance(name, str):
            raise TypeError(f"ProbeSample {what}: name {name!r} is not a string; name each quantity with a string")
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise TypeError(
                f"ProbeSample {what}[{name!r}]={value!r} is not a number; give a real number or None (missing)"
            )
        checked[name] = None if value is None else float(value)
    return _ReadOnlyValues(checked)


@dataclass(frozen=True)
class ProbeSample:
    """One reading of a probe: quantities by name, metrics by name, and when it was taken.

    `timestamp` is in seconds on a monotonic clock (the caller's, or
    ``time.monotonic()``): only differences between samples mean anything.
    Values are floats or None (missing); NaN and inf are kept as measured,
    never refused, because judging them is the runtime's job. A name that
    is absent reads as missing too.
    """

    timestamp: float
    values: Mapping[str, float | None] = field(default_factory=dict)
    metrics: Mapping[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (
            isinstance(self.timestamp, bool)
            or not isinstance(self.timestamp, numbers.Real)
            or not math.isfinite(self.timestamp)
        ):
            raise TypeError(
                f"ProbeSample timestamp={self.timestamp!r} is not a finite number; "
                "give seconds on a monotonic clock such as time.monotonic()"
            )
        object.__setattr__(self, "timestamp", float(self.timestamp))
        object.__setattr__(self, "values", _measurements(self.values, "values"))
        object.__setattr__(self, "metrics", _measurements(self.metrics, "metrics"))

    def get(self, quantity: str) -> float | None:
        """The value of `quantity`, None when it is missing."""
        return self.values.get(quantity)

    @property
    def compute_util(self) -> float | None:
        return self.values.get(COMPUTE_UTIL)

    @property
    def mem_bw_used(self) -> float | None:
        return self.values.get(MEM_BW_USED)

    @property
    def mem_bw_peak(self) -> float | None:
        return self.values.get(MEM_BW_PEAK)

    @property
    def temperature(self) -> float | None:
        return self.values.get(TEMPERATURE)

    @property
    def queue_depth(self) -> float | None:
        return self.values.get(QUEUE_DEPTH)

    def cache_miss_rate(self, level: int) -> float | None:
        """The miss rate of cache level `level` in %, None when it is missing."""
        return self.values.get(cache_miss_quantity(level))


class HardwareProbe(abc.ABC):
    """A source of `ProbeSample`s: one call to `sample` per control cycle.

    A probe declares in `quantities` every name it may report, so a
    calibration can be checked against it before the first cycle (a typo
    in a mapping is a setup error, not a controller that silently falls
    back forever); any of them may still be missing in a given sample.
    Probes are context managers; `close` releases what they hold.
    """

    label: str = "probe"
    """How messages name this probe."""

    @property
    @abc.abstractmethod
    def quantities(self) -> frozenset[str]:
        """Every quantity name this probe may report."""

    @abc.abstractmethod
    def sample(self, now: float | None = None) -> ProbeSample:
        """Measure once; `now` is the monotonic timestamp to stamp (default ``time.monotonic()``)."""

    def close(self) -> None:
        """Release files or handles; a probe without any needs nothing here."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
