"""certfsm run, audit verify, audit export and replay: what happened can be proved afterwards."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import numpy as np
import pytest
from cli_in_process import run_main
from cli_process import running_cli, stop
from cli_run import run_cli

INPUTS = ("compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A recorded trace of the example's inputs with a latency metric that breaches the SLA now and then."""
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    rows = ["compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth,latency_ms"]
    for k in range(3000):
        values = [
            rng.uniform(0, 100),
            rng.uniform(0, 100),
            rng.uniform(0, 100),
            rng.uniform(20, 110),
            rng.uniform(0, 64),
        ]
        cells = [f"{v:.3f}" for v in values]
        if k % 97 == 5:
            cells[3] = "nan"
        latency = "" if k % 211 == 7 else f"{30.0 if (k // 50) % 7 == 3 else 4.0}"
        rows.append(",".join(cells + [latency]))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_recorded_run_verifies_replays_and_exports(distilled_example, trace, tmp_path):
    artifact = distilled_example[2]
    log = tmp_path / "run.log"
    code, out, err = run_main("run", artifact, "--probe", f"trace:{trace}", "--audit", log)
    assert code == 0, err
    assert out.startswith("3000 cycles; tokens: ") and "FALLBACK_SLA" in out and "FALLBACK_ENVELOPE" in out
    code, out, _ = run_main("audit", "verify", log)
    assert code == 0 and "intact, 3001 records" in out
    code, out, _ = run_main("replay", log, "--artifact", artifact)
    assert code == 0 and out.startswith("3000 steps replayed; every decision reproduced")
    code, out, _ = run_main("audit", "export", log)
    lines = [json.loads(line) for line in out.splitlines()]
    steps = [line for line in lines if line["kind"] == "step"]
    assert code == 0 and len(steps) == 3000 and set(steps[0]["reading"]) == set(INPUTS)


@pytest.mark.slow
def test_a_changed_record_is_found_at_its_index_and_the_replay_stops_there(distilled_example, trace, tmp_path):
    artifact = distilled_example[2]
    log = tmp_path / "run.log"
    assert run_cli("run", artifact, "--probe", f"trace:{trace}", "--audit", log, "--steps", "500")[0] == 0
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x10
    log.write_bytes(bytes(data))
    code, out, _ = run_cli("audit", "verify", log)
    index = int(out.split("record ")[1].split()[0])
    assert code == 1 and 200 <= index <= 300
    code, out, _ = run_cli("replay", log, "--artifact", artifact)
    assert code == 1 and out.startswith(f"divergence at record {index}: ")


@pytest.mark.slow
def test_sighup_hot_swaps_and_sigterm_stops_with_the_log_closed_and_verifiable(distilled_example, tmp_path):
    artifact = distilled_example[2]
    log = tmp_path / "live.log"
    with running_cli(
        "run", artifact, "--probe", "linux", "--period-ms", "5", "--audit", log, "--fsync-every", "1"
    ) as process:
        deadline = time.monotonic() + 60
        while (not log.exists() or log.stat().st_size < 2000) and time.monotonic() < deadline:
            time.sleep(0.1)
        process.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        out, err = stop(process)
    assert process.returncode == 0, err
    assert "hot swap: " in out
    code, verified, _ = run_cli("audit", "verify", log)
    assert code == 0 and ", closed;" in verified
    code, replayed, _ = run_cli("replay", log, "--artifact", artifact)
    assert code == 0, replayed


@pytest.mark.slow
def test_sighup_swaps_to_a_coarser_grid_and_refuses_files_it_cannot_use_while_the_run_goes_on(
    distilled_example, coarse_example, renamed_example, tmp_path
):
    """The artifact file is replaced on disk between SIGHUPs: by the example on a 16-cell grid (swapped), by a
    damaged file and by an artifact of another layout (both refused: told on stderr at once, counted in the
    metrics, logged in the audit log); the run goes on with the machine in force, and the log replays."""
    import shutil
    import socket
    import urllib.request

    from certfsm.runtime import read_log
    from certfsm.runtime._audit_format import RefusalRecord, StepRecord, SwapRecord

    pytest.importorskip("prometheus_client", reason="the metrics extra (prometheus-client) is not installed")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    slot, log = tmp_path / "live.cfsm", tmp_path / "live.log"
    shutil.copyfile(distilled_example[2], slot)

    def logged(kind) -> int:
        return sum(isinstance(record, kind) for record in read_log(log)) if log.exists() else 0

    def wait_for(condition) -> None:
        deadline = time.monotonic() + 60
        while not condition() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert condition(), process.poll()

    def replace_and_reload(data: bytes, kind, count: int) -> None:
        staged = tmp_path / "staged.cfsm"
        staged.write_bytes(data)
        staged.replace(slot)
        steps = logged(StepRecord)
        process.send_signal(signal.SIGHUP)
        wait_for(lambda: logged(kind) == count)
        wait_for(lambda: logged(StepRecord) > steps + 5)  # and the run went on

    with running_cli(
        "run",
        slot,
        "--probe",
        "linux",
        "--period-ms",
        "5",
        "--audit",
        log,
        "--fsync-every",
        "1",
        "--metrics-port",
        port,
    ) as process:
        wait_for(lambda: logged(StepRecord) > 5)
        replace_and_reload(coarse_example.read_bytes(), SwapRecord, 1)
        replace_and_reload(coarse_example.read_bytes()[:-40], RefusalRecord, 1)
        replace_and_reload(renamed_example.read_bytes(), RefusalRecord, 2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            metrics = response.read().decode()
        out, err = stop(process)
    assert process.returncode == 0, err
    assert "certfsm_refused_reloads_total 2.0" in metrics and "certfsm_swaps_total 1.0" in metrics
    assert f"hot swap: {distilled_example[1].artifact_sha256[:12]} -> " in out
    told = [line for line in err.splitlines() if line.startswith("certfsm run: reload refused, ")]
    assert len(told) == 2 and told[0].startswith(f"certfsm run: reload refused, the machine in force goes on: {slot}: ")
    assert re.search(r"inputs \(.*queue_len\) differ from those of the running artifact", told[1]), told[1]
    refusals = [record for record in read_log(log) if isinstance(record, RefusalRecord)]
    assert [record.reason for record in refusals] == [line.split("goes on: ", 1)[1] for line in told]
    code, replayed, _ = run_cli("replay", log, "--artifact", distilled_example[2], "--artifact", coarse_example)
    assert code == 0, replayed


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--probe", "nowhere"),
            r"^certfsm: error: --probe nowhere is not a probe; give --probe linux, --probe "
            r"trace:FILE\.csv or --probe example-trace$",
        ),
        (
            ("--probe", "linux", "--metrics-port", "0"),
            r"^certfsm: error: --metrics-port 0 is not a TCP port; give a port "
            r"in 1\.\.65535, e\.g\. --metrics-port 9108$",
        ),
        (("--probe", "linux", "--steps", "0"), r"^certfsm: error: --steps 0 is not a positive number of cycles"),
        (("--probe", "linux", "--period-ms", "-3"), r"^certfsm: error: --period-ms -3 is not a number of milliseconds"),
    ],
)
def test_bad_run_flags_are_one_line_and_exit_2(distilled_example, args, message):
    import re

    code, _, err = run_main("run", distilled_example[2], *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and re.match(message, lines[0]), err


def test_open_probe_names_its_parameter_not_the_flag():
    from certfsm import UsageError
    from certfsm.runtime._run import open_probe

    with pytest.raises(
        UsageError,
        match=r"^probe='nowhere' is not a probe; give probe='linux', "
        r"probe='trace:FILE\.csv' or probe='example-trace'$",
    ):
        open_probe("nowhere", INPUTS)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(steps=0), r"^steps=0 is not a positive number of cycles; give e\.g\. steps=1000$"),
        (dict(period_ms=-3.0), r"^period_ms=-3 is not a number of milliseconds >= 0; give e\.g\. period_ms=10$"),
        (dict(fsync_every=-1), r"^fsync_every=-1 is negative; give 1 \(every record\), N, or 0 \(on close\)$"),
    ],
)
def test_run_artifact_names_its_parameters_not_the_flags(distilled_example, options, message):
    from certfsm import UsageError
    from certfsm.runtime import run_artifact

    with pytest.raises(UsageError, match=message):
        run_artifact(distilled_example[2], "example-trace", **options)


def test_run_artifact_runs_logs_and_restores_the_signal_handlers(distilled_example, tmp_path):
    from certfsm.runtime import read_log, run_artifact, verify_log

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    done = run_artifact(distilled_example[2], "example-trace", steps=300, audit=tmp_path / "run.log")
    assert done.summary.steps == 300 and sum(done.summary.tokens.values()) == 300
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert verify_log(tmp_path / "run.log").ok and done.audit_records == len(list(read_log(tmp_path / "run.log")))


def test_run_artifact_runs_outside_the_main_thread_without_touching_signals(distilled_example):
    import threading

    from certfsm.runtime import run_artifact

    results, errors = [], []

    def work():
        try:
            results.append(run_artifact(distilled_example[2], "example-trace", steps=50))
        except Exception as error:  # reported below, with the test's failure
            errors.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert not errors and results and results[0].summary.steps == 50


def test_a_log_replayed_without_its_artifact_names_the_parameter_or_the_flag(
    distilled_example, coarse_example, trace, tmp_path
):
    from certfsm import AuditLogError
    from certfsm.runtime import replay_log

    log = tmp_path / "run.log"
    assert run_main("run", distilled_example[2], "--probe", f"trace:{trace}", "--audit", log, "--steps", "3")[0] == 0
    with pytest.raises(
        AuditLogError,
        match=r"^the log was written by artifact [0-9a-f]{64}, which was not given; "
        r"give it with artifacts=$",
    ):
        replay_log(log, [coarse_example])
    code, out, err = run_main("replay", log, "--artifact", coarse_example)
    assert (code, out) == (2, "") and re.fullmatch(
        r"certfsm: error: the log was written by artifact [0-9a-f]{64}, "
        r"which was not given; give it with --artifact\n",
        err,
    ), err


def test_an_existing_log_is_never_overwritten(distilled_example, trace, tmp_path):
    log = tmp_path / "kept.log"
    log.write_bytes(b"earlier records")
    code, _, err = run_main("run", distilled_example[2], "--probe", f"trace:{trace}", "--audit", log, "--steps", "3")
    assert code == 2 and "Traceback" not in err and log.read_bytes() == b"earlier records"
    assert len(err.strip().splitlines()) == 1 and os.fspath(log.name) in err
