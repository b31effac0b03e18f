"""Prometheus export of `RuntimeCounters` on 127.0.0.1 (`certfsm run --metrics-port N`).

The only module that imports prometheus_client (an optional extra:
``pip install 'certfsm[metrics]'``), and only when a server is started.
A collector reads one `snapshot()` per scrape, so every figure of a
scrape comes from the same moment (the per-token counts sum to the
steps). The server binds the loopback address only: the counters
describe a control loop and are not for the network at large.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from certfsm import UsageError

from ._observe import CountersSnapshot, RuntimeCounters

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.core import Metric

PREFIX = "certfsm"


def _families(snapshot: CountersSnapshot) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

    steps = CounterMetricFamily(f"{PREFIX}_steps", "Decisions made (control cycles).")
    steps.add_metric([], snapshot.steps)
    tokens = CounterMetricFamily(f"{PREFIX}_decisions", "Decisions by token.", labels=["token"])
    for token, count in snapshot.token_counts().items():
        tokens.add_metric([token], count)
    reasons = CounterMetricFamily(f"{PREFIX}_reasons", "Decisions by reason code.", labels=["reason"])
    for reason, count in snapshot.reason_counts().items():
        reasons.add_metric([reason], count)
    yield from (steps, tokens, reasons)
    for name, text, value in (
        ("sla_breaches", "SLA breaches (sla_ok turned false).", snapshot.sla_breaches),
        ("sla_recoveries", "SLA recoveries (sla_ok turned true again).", snapshot.sla_recoveries),
        ("swaps", "Hot swaps of the artifact.", snapshot.swaps),
        (
            "refused_reloads",
            "Swaps and reloads refused (the artifact in force kept running).",
            snapshot.refused_reloads,
        ),
        ("override_requests", "Operator override requests.", snapshot.override_requests),
    ):
        family = CounterMetricFamily(f"{PREFIX}_{name}", text)
        family.add_metric([], value)
        yield family
    cumulative, buckets = 0, []
    for bound, count in zip(snapshot.latency_bounds_ns + (None,), snapshot.latency_buckets):
        cumulative += count
        buckets.append(("+Inf" if bound is None else repr(bound / 1e9), cumulative))
    latency = HistogramMetricFamily(f"{PREFIX}_step_latency_seconds", "Time per step (lock, SLA, step, audit).")
    latency.add_metric([], buckets, sum_value=snapshot.latency_sum_ns / 1e9)
    yield latency


class _Collector:
    def __init__(self, counters: RuntimeCounters) -> None:
        self._counters = counters

    def collect(self) -> list[Metric]:
        return list(_families(self._counters.snapshot()))


def serve_metrics(counters: RuntimeCounters, port: int) -> WSGIServer:
    """Serve `counters` at http://127.0.0.1:`port`/metrics from a daemon thread; returns the server (call shutdown()).

    UsageError (one line naming the fix) when prometheus-client is not
    installed or the port cannot be bound.
    """
    if not 0 < port < 65536:
        raise UsageError(f"port={port!r} is not a TCP port; give a port in 1..65535, e.g. port=9108")
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise UsageError(
            f"port={port!r} needs prometheus-client, which is not installed; "
            "pip install 'certfsm[metrics]' (or prometheus-client), or serve no metrics"
        ) from None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(counters))
    try:
        served = start_http_server(port, addr="127.0.0.1", registry=registry)
    except OSError as error:
        raise UsageError(
            f"port={port!r}: cannot listen on 127.0.0.1:{port} ({error.strerror or error}); "
            "give a free port or stop what holds it"
        ) from None
    return served[0] if isinstance(served, tuple) else served
