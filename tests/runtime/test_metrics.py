"""Observability: the runtime's counters, and `certfsm run --metrics-port` scraped over loopback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from cli_in_process import run_main
from cli_process import running_cli, stop

from certfsm.machine import Reason
from certfsm.runtime import RuntimeCounters


def test_counters_count_tokens_reasons_breaches_recoveries_and_latency():
    counters = RuntimeCounters(("A", "B"))
    for token, reason, sla_ok, latency in [
        (0, Reason.KEEP_CURRENT, True, 500),
        (1, Reason.FALLBACK_SLA, False, 3_000),
        (1, Reason.FALLBACK_SLA, False, 10**12),
        (0, Reason.SWITCH, True, 1_000),
    ]:
        counters.count_step(token, reason, sla_ok, latency)
    counters.count_swap()
    counters.count_refused_reload()
    counters.count_override_request()
    snapshot = counters.snapshot()
    assert snapshot.token_counts() == {"A": 2, "B": 2} and snapshot.steps == 4
    assert snapshot.reason_counts()["FALLBACK_SLA"] == 2 and sum(snapshot.by_reason) == 4
    assert (snapshot.sla_breaches, snapshot.sla_recoveries) == (1, 1)
    assert (snapshot.swaps, snapshot.refused_reloads, snapshot.override_requests) == (1, 1, 1)
    assert snapshot.latency_buckets[0] == 2 and snapshot.latency_buckets[-1] == 1 and sum(snapshot.latency_buckets) == 4


def test_an_attached_controller_counts_every_step_swap_and_override(distilled_example):
    from certfsm import runtime

    controller = runtime.load(distilled_example[2])
    counters = RuntimeCounters(controller.machine.tokens)
    controller.attach_counters(counters)
    tokens = [controller.step([50.0, 50.0, 50.0, 50.0, 10.0], metrics={"latency_ms": 1.0}).token for _ in range(20)]
    controller.swap(runtime.load_machine(distilled_example[2]))
    with pytest.raises(ValueError):
        controller.override("NO SUCH TOKEN")
    snapshot = counters.snapshot()
    assert snapshot.steps == 20 and snapshot.token_counts()[tokens[-1]] >= 1 and sum(snapshot.by_token) == 20
    assert (snapshot.swaps, snapshot.override_requests) == (1, 1) and sum(snapshot.latency_buckets) == 20


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _parse(text: str) -> dict[str, float]:
    """Prometheus text format to {'name{labels}': value} (comments dropped)."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def _scrape(port: int) -> dict[str, float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return _parse(response.read().decode())
    except OSError:
        return None


@pytest.mark.slow
def test_a_run_serves_counters_that_match_its_decisions(distilled_example):
    pytest.importorskip("prometheus_client", reason="the metrics extra (prometheus-client) is not installed")
    port = _free_port()
    with running_cli(
        "run", distilled_example[2], "--probe", "example-trace", "--period-ms", "2", "--metrics-port", port
    ) as process:
        deadline, samples = time.monotonic() + 60, None
        while time.monotonic() < deadline and process.poll() is None:
            samples = _scrape(port)
            if samples and samples.get('certfsm_reasons_total{reason="FALLBACK_SLA"}', 0) > 0:
                break
            time.sleep(0.2)
        out, err = stop(process)
    assert process.returncode == 0, err
    assert samples is not None, f"no scrape of 127.0.0.1:{port} succeeded: {err}"
    steps = samples["certfsm_steps_total"]
    tokens = {k: v for k, v in samples.items() if k.startswith("certfsm_decisions_total{")}
    reasons = {k: v for k, v in samples.items() if k.startswith("certfsm_reasons_total{")}
    assert steps > 0 and sum(tokens.values()) == steps and sum(reasons.values()) == steps
    assert reasons['certfsm_reasons_total{reason="FALLBACK_SLA"}'] > 0 and samples["certfsm_sla_breaches_total"] >= 1
    assert samples['certfsm_step_latency_seconds_bucket{le="+Inf"}'] == steps
    assert samples["certfsm_swaps_total"] == 0 and samples["certfsm_refused_reloads_total"] == 0
    cycles = int(re.match(r"(\d+) cycles", out).group(1))
    assert cycles >= steps


def test_serve_metrics_names_its_port_parameter_not_the_flag(monkeypatch):
    from certfsm import UsageError
    from certfsm.runtime import serve_metrics

    counters = RuntimeCounters(("A", "B"))
    with pytest.raises(UsageError, match=r"^port=0 is not a TCP port; give a port in 1\.\.65535, e\.g\. port=9108$"):
        serve_metrics(counters, 0)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(
        UsageError,
        match=r"^port=9 needs prometheus-client, which is not installed; pip install "
        r"'certfsm\[metrics\]' \(or prometheus-client\), or serve no metrics$",
    ):
        serve_metrics(counters, 9)


def test_a_taken_port_is_named_as_the_parameter_by_the_library():
    pytest.importorskip("prometheus_client", reason="the metrics extra (prometheus-client) is not installed")
    from certfsm import UsageError
    from certfsm.runtime import serve_metrics

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(
            UsageError,
            match=rf"^port={port}: cannot listen on 127\.0\.0\.1:{port} \(.*\); give a "
            r"free port or stop what holds it$",
        ):
            serve_metrics(RuntimeCounters(("A", "B")), port)


def test_a_taken_port_is_one_line_and_exit_2(distilled_example):
    pytest.importorskip("prometheus_client", reason="the metrics extra (prometheus-client) is not installed")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, _, err = run_main("run", distilled_example[2], "--probe", "example-trace", "--metrics-port", port)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert re.match(
        rf"^certfsm: error: --metrics-port {port}: cannot listen on 127\.0\.0\.1:{port} .*give a free port", lines[0]
    )


@pytest.mark.slow
def test_without_prometheus_client_the_run_says_how_to_install_it(distilled_example):
    code = (
        "import sys\nsys.modules['prometheus_client'] = None\nfrom certfsm.cli import main\n"
        f"sys.exit(main(['run', {str(distilled_example[2])!r}, '--probe', 'example-trace', '--metrics-port', "
        "'9']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert re.match(
        r"^certfsm: error: --metrics-port 9 needs prometheus-client, which is not installed; "
        r"pip install 'certfsm\[metrics\]'",
        lines[0],
    )
