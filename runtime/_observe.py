"""Runtime counters for observability: what the controller decided, counted every cycle, standard library only.

`RuntimeCounters` is what a Controller updates when counters are attached
(`Controller.attach_counters`): decisions per token and per reason, SLA
breaches (sla_ok going from true to false) and recoveries (false to
true), hot swaps, refused swaps and reloads (`Controller.swap` of
another layout, `Controller.refuse_swap` for a file that did not load),
override requests, and step latency in a fixed-bucket histogram. It is
cheap (a lock, a few list increments and one bisect per cycle) because
it runs every cycle, and it knows nothing of any exporter: `_metrics_export` reads
`snapshot()` from its own thread and imports prometheus_client, lazily.

Invariant of every snapshot: the per-token counts, the per-reason counts
and the latency histogram's count each sum to `steps` (one lock guards
an update and a snapshot, so a scrape never sees half a cycle).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from certfsm.machine import Machine, Reason

# Upper bounds of the latency buckets, in nanoseconds (a last, unbounded bucket follows):
# a table step takes microseconds, a step with an fsync'd audit record milliseconds.
LATENCY_BOUNDS_NS = (
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    10_000_000,
    100_000_000,
)


@dataclass(frozen=True)
class CountersSnapshot:
    """The counters at one moment. Tuples by output index (`tokens` names them) and by `Reason` value."""

    tokens: tuple[str, ...]
    steps: int
    by_token: tuple[int, ...]
    by_reason: tuple[int, ...]
    sla_breaches: int
    sla_recoveries: int
    swaps: int
    refused_reloads: int
    override_requests: int
    latency_bounds_ns: tuple[int, ...]
    latency_buckets: tuple[int, ...]  # per bucket, not cumulative; one more than the bounds (the +Inf bucket)
    latency_sum_ns: int

    def token_counts(self) -> dict[str, int]:
        return dict(zip(self.tokens, self.by_token))

    def reason_counts(self) -> dict[str, int]:
        return {reason.name: self.by_reason[reason] for reason in Reason}


class RuntimeCounters:
    """Counts a running controller's cycles; see the module docstring.

    Make it with `RuntimeCounters.for_machine(controller.machine)`; `tokens`
    (the machine's token names, by output index) is what that passes, and
    counts are kept by output index, so the names must be the machine's in
    its order. A hot swap keeps the tokens (`Controller.swap` refuses any
    other layout), so one set of counters serves every machine of a run.
    """

    @classmethod
    def for_machine(cls, machine: Machine) -> RuntimeCounters:
        """Counters for the controller running `machine` (a `certfsm.machine.Machine`), named by its tokens."""
        return cls(machine.tokens)

    def __init__(self, tokens: Iterable[str]) -> None:
        self._tokens = tuple(tokens)
        self._lock = threading.Lock()
        self._by_token = [0] * len(self._tokens)
        self._by_reason = [0] * len(Reason)
        self._steps = 0
        self._sla_ok = True
        self._sla_breaches = self._sla_recoveries = 0
        self._swaps = self._refused_reloads = self._override_requests = 0
        self._buckets = [0] * (len(LATENCY_BOUNDS_NS) + 1)
        self._latency_sum_ns = 0

    def count_step(self, token: int, reason: int, sla_ok: bool, latency_ns: int) -> None:
        """One decision: its output index, its reason, the SLA verdict of the cycle and how long the step took.

        Every cycle: the lock is taken with acquire/release, half the cost of a `with` block here.
        """
        lock = self._lock
        lock.acquire()
        try:
            self._steps += 1
            self._by_token[token] += 1
            self._by_reason[reason] += 1
            if sla_ok != self._sla_ok:
                if sla_ok:
                    self._sla_recoveries += 1
                else:
                    self._sla_breaches += 1
                self._sla_ok = sla_ok
            self._buckets[bisect_left(LATENCY_BOUNDS_NS, latency_ns)] += 1
            self._latency_sum_ns += latency_ns
        finally:
            lock.release()

    def count_swap(self) -> None:
        with self._lock:
            self._swaps += 1

    def count_refused_reload(self) -> None:
        """A swap or reload that was refused: the machine in force went on."""
        with self._lock:
            self._refused_reloads += 1

    def count_override_request(self) -> None:
        with self._lock:
            self._override_requests += 1

    def snapshot(self) -> CountersSnapshot:
        with self._lock:
            return CountersSnapshot(
                self._tokens,
                self._steps,
                tuple(self._by_token),
                tuple(self._by_reason),
                self._sla_breaches,
                self._sla_recoveries,
                self._swaps,
                self._refused_reloads,
                self._override_requests,
                LATENCY_BOUNDS_NS,
                tuple(self._buckets),
                self._latency_sum_ns,
            )
