"""Ring buffers over the last `size` cycles, with exact windowed statistics.

A window always spans cycles, not samples: every cycle pushes exactly one
entry, and a cycle that has nothing to contribute (the path did not
apply, or its metric was missing) pushes an empty entry (None, or False
for the violation flags). Cycles before the first one are empty entries
too, so a fresh window behaves exactly like one that saw only empty
cycles. That is what makes a snapshot compact and canonical: leading
empty entries carry no information and are left out (`entries`), and a
restore pads them back (`load`).

The statistics are exact, because a windowed SLA is decided by comparing
them with a limit and a monitor must agree with a re-computation from the
whole history on every cycle, not merely on most of them:

- percentiles use the nearest rank, so the result is one of the samples;
  the samples are kept in a sorted list maintained with `bisect`: O(log
  size) comparisons per cycle plus a memmove of at most `size` pointers,
  which stays small beside the interpreter's own cost for the windows an
  SLA uses (one p95 path updates in about 1.8 us with a window of 16,
  2.2 us with 1 000 and 3 us with 10 000; at 100 000 the memmove
  dominates, 15 us);
- the mean keeps the exact sum of the samples as an integer in units of
  2**-1074, the smallest float64 step, so every finite float64 is a whole
  number of units; the comparison with the limit is then exact integer
  arithmetic and the reported mean is the correctly rounded quotient. A
  sample that is not a float64 (a Fraction) goes into a separate exact
  rational part, zero (and never consulted) while the window holds floats
  only.

Samples are canonical (`certfsm.sla._sample`): non-negative, at most
float64's maximum, a float when the value is a float64 (never -0.0), else
a Fraction. So equal samples are identical values, the sorted list
depends only on the multiset of samples in the window, and a sample that
would poison a sum (NaN, an infinity, a negative) never gets here.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from fractions import Fraction
from typing import Self

from ._sample import Sample

_UNIT_BITS = 1074
"""Every finite float64 is an integer multiple of 2**-1074 (the smallest subnormal)."""


def exact_units(x: float) -> int:
    """The finite float `x` as an exact integer number of 2**-1074 units."""
    numerator, denominator = x.as_integer_ratio()
    return numerator << (_UNIT_BITS + 1 - denominator.bit_length())


def limit_in_units(limit: Fraction) -> tuple[int, int]:
    """The rational `limit` as (numerator, denominator) in 2**-1074 units: limit = numerator / denominator units."""
    return limit.numerator << _UNIT_BITS, limit.denominator


def nearest_rank(q: int, n: int) -> int:
    """The 1-based rank of the q-th percentile of n >= 1 samples: ceil(q * n / 100), at least 1."""
    return max(1, (q * n + 99) // 100)


class ViolationWindow:
    """The violation flags of the last `size` cycles and how many of them are set (O(1) per cycle)."""

    __slots__ = ("size", "flags", "position", "count")

    def __init__(self, size: int) -> None:
        self.size = size
        self.flags = [False] * size
        self.position = 0  # the oldest entry, overwritten by the next push
        self.count = 0

    def push(self, violation: bool) -> int:
        """Record this cycle's flag, dropping the oldest; returns the count over the window."""
        position = self.position
        self.count += violation - self.flags[position]
        self.flags[position] = violation
        self.position = position + 1 if position + 1 < self.size else 0
        return self.count

    def entries(self) -> list[bool]:
        """The flags, oldest first, without the leading unset ones."""
        ordered = self.flags[self.position :] + self.flags[: self.position]
        first = ordered.index(True) if self.count else len(ordered)
        return ordered[first:]

    def load(self, entries: list[bool]) -> None:
        """Restore from `entries()` (at most `size` flags, oldest first)."""
        self.flags = [False] * (self.size - len(entries)) + [bool(v) for v in entries]
        self.position = 0
        self.count = sum(self.flags)

    def copy(self) -> ViolationWindow:
        clone = ViolationWindow.__new__(ViolationWindow)
        clone.size, clone.flags, clone.position, clone.count = self.size, self.flags[:], self.position, self.count
        return clone


class SampleWindow:
    """The samples of the last `size` cycles (None for a cycle without one); subclasses keep a statistic.

    `push` costs O(1) here plus what `_add` and `_remove` cost; `count` is
    the number of samples (not cycles) in the window.
    """

    __slots__ = ("size", "ring", "position", "count")

    def __init__(self, size: int) -> None:
        self.size = size
        self.ring: list[Sample | None] = [None] * size
        self.position = 0  # the oldest entry, overwritten by the next push
        self.count = 0
        self._clear()

    def push(self, sample: Sample | None) -> None:
        """Record this cycle's sample (or None), dropping the oldest cycle's."""
        position = self.position
        old = self.ring[position]
        if old is not None:
            self._remove(old)
            self.count -= 1
        if sample is not None:
            self._add(sample)
            self.count += 1
        self.ring[position] = sample
        self.position = position + 1 if position + 1 < self.size else 0

    def entries(self) -> list[Sample | None]:
        """The window's entries, oldest first, without the leading empty ones."""
        ordered = self.ring[self.position :] + self.ring[: self.position]
        first = 0
        while first < len(ordered) and ordered[first] is None:
            first += 1
        return ordered[first:]

    def load(self, entries: list[Sample | None]) -> None:
        """Restore from `entries()` (at most `size` entries, oldest first, canonical samples or None)."""
        self.ring = [None] * (self.size - len(entries)) + list(entries)
        self.position = 0
        self.count = 0
        self._clear()
        for sample in self.ring:
            if sample is not None:
                self._add(sample)
                self.count += 1

    def copy(self) -> Self:
        clone = self.__class__.__new__(self.__class__)
        clone.size, clone.ring, clone.position, clone.count = self.size, self.ring[:], self.position, self.count
        clone._copy_from(self)
        return clone

    def _clear(self) -> None:
        raise NotImplementedError

    def _add(self, sample: Sample) -> None:
        raise NotImplementedError

    def _remove(self, sample: Sample) -> None:
        raise NotImplementedError

    def _copy_from(self, other: Self) -> None:
        raise NotImplementedError


class SortedWindow(SampleWindow):
    """A sample window that keeps its samples sorted, for exact nearest-rank percentiles."""

    __slots__ = ("ordered",)

    def percentile(self, q: int) -> Sample | None:
        """The q-th percentile by nearest rank: the ceil(q n / 100)-th smallest of the n samples; None if n = 0."""
        if not self.count:
            return None
        return self.ordered[nearest_rank(q, self.count) - 1]

    def _clear(self) -> None:
        self.ordered: list[Sample] = []

    def _add(self, sample: Sample) -> None:
        insort(self.ordered, sample)

    def _remove(self, sample: Sample) -> None:
        del self.ordered[bisect_left(self.ordered, sample)]

    def _copy_from(self, other: Self) -> None:
        self.ordered = other.ordered[:]


class SumWindow(SampleWindow):
    """A sample window that keeps the exact sum of its samples, for the exact mean.

    `units` is the sum of the float samples in 2**-1074 units, `extra` the
    exact sum of the `exact_count` others (Fractions; 0 while there are none,
    and then never consulted).
    """

    __slots__ = ("units", "extra", "exact_count")

    def mean(self) -> float | None:
        """The arithmetic mean of the samples, correctly rounded to float64; None if there are none."""
        if not self.count:
            return None
        if self.exact_count:
            return float((Fraction(self.units, 1 << _UNIT_BITS) + self.extra) / self.count)
        return self.units / (self.count << _UNIT_BITS)

    def mean_exceeds(self, numerator: int, denominator: int) -> bool:
        """Whether the exact mean is above the limit (numerator, denominator) of `limit_in_units`; False if empty."""
        if self.exact_count:
            return Fraction(self.units, 1 << _UNIT_BITS) + self.extra > Fraction(
                self.count * numerator, denominator << _UNIT_BITS
            )
        return self.count > 0 and self.units * denominator > self.count * numerator

    def _clear(self) -> None:
        self.units = 0
        self.extra: Fraction | int = 0
        self.exact_count = 0

    def _add(self, sample: Sample) -> None:
        if isinstance(sample, float):  # canonical samples: exactly float or Fraction
            self.units += exact_units(sample)
        else:
            self.extra += sample
            self.exact_count += 1

    def _remove(self, sample: Sample) -> None:
        if isinstance(sample, float):
            self.units -= exact_units(sample)
        else:
            self.exact_count -= 1
            self.extra = self.extra - sample if self.exact_count else 0

    def _copy_from(self, other: Self) -> None:
        self.units, self.extra, self.exact_count = other.units, other.extra, other.exact_count
