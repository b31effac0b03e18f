"""A command whose Ray cluster goes away mid-run ends with one line and exit 2, and distill writes no artifact.

Why: Ray's driver does not raise when the cluster's head dies; it waits,
then ends the process after a minute with Ray's own exit status. certfsm
checks the head between waits (`_ray_pool.HEARTBEAT_SECONDS`), so the
command stops with its own message and exit code, having decided nothing
from the unfinished tasks.

The head is a real ``ray start --head`` on 127.0.0.1 (its own temporary
folder, two CPUs), killed with SIGKILL process by process, its workers
included; it runs after test_ray_pool's head has stopped (same xdist
group, one module at a time), so one head runs at a time.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cli_run import one_line_error, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def _processes() -> dict[int, tuple[int, str]]:
    """{pid: (parent pid, command line)} of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            table[int(entry.name)] = (parent, command)
    return table


def _head_processes(folder: str) -> list[int]:
    """The head's processes (their command line names its temporary `folder`) and their descendants."""
    table = _processes()
    found = {pid for pid, (_, command) in table.items() if folder in command}
    grown = True
    while grown:
        children = {pid for pid, (parent, _) in table.items() if parent in found} - found
        grown = bool(children)
        found |= children
    return sorted(found)


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def ray_head_to_lose():
    """A `ray start --head` on 127.0.0.1: (its address, its temporary folder, the environment to join it with).

    The folder is a short one directly under the system's temporary folder:
    Ray makes Unix sockets below it, whose paths may not exceed 107 bytes
    (pytest's own folders under xdist are too deep).
    """
    ray = shutil.which("ray", path=os.path.dirname(sys.executable))
    if ray is None:
        pytest.skip('Ray is not installed (pip install "certfsm[ray]")')
    folder = tempfile.mkdtemp(prefix="certfsm-ray-")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = dict(
        os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled"
    )
    command = [ray, "start", "--head", "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false"]
    started = subprocess.run([*command, "--temp-dir", folder], env=environment, capture_output=True, text=True)
    try:
        assert started.returncode == 0, started.stderr
        yield f"127.0.0.1:{port}", folder, environment
    finally:
        _kill(_head_processes(folder))
        shutil.rmtree(folder, ignore_errors=True)


def test_a_distillation_that_loses_its_cluster_exits_2_in_one_line_and_writes_no_artifact(ray_head_to_lose, tmp_path):
    address, folder, environment = ray_head_to_lose
    out = tmp_path / "example.cfsm"
    command = [sys.executable, "-m", "certfsm.cli", "distill", "--example", "--out", str(out), "--report",
               str(tmp_path / "report"), "--jobs", "2", "--no-progress", "--ray", address]  # fmt: skip
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            if any("ray::certfsm distillation: " in command for _, command in _processes().values()):
                break  # a task runs: the distillation is under way
            time.sleep(0.02)
        assert process.poll() is None, "the distillation ended before any task ran on Ray"
        _kill(_head_processes(folder))
        _, err = process.communicate(timeout=50)  # well before Ray's own minute
    finally:
        process.kill()
    # Ray's core worker may log to the same stderr first (lines in its own format, "[date ...] file.cc:N: ...");
    # certfsm's own part is one line, without a traceback.
    ours = "\n".join(line for line in err.splitlines() if not re.match(r"\[\d{4}-\d\d-\d\d [\d:,]+ \w ", line))
    assert one_line_error(
        process.returncode, ours, rf"certfsm: error: distillation: lost the Ray cluster at {address} "
    ), err
    assert not out.exists()


def test_an_address_where_no_cluster_answers_is_one_line_exit_2_at_once(tmp_path):
    pytest.importorskip("ray", reason='Ray is not installed (pip install "certfsm[ray]")')
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once the probe closes: nothing listens there
    started = time.monotonic()
    code, _, err = run_cli("distill", "--example", "--out", tmp_path / "x.cfsm", "--ray", f"127.0.0.1:{port}")
    assert one_line_error(code, err, rf"certfsm: error: --ray 127\.0\.0\.1:{port}: no Ray cluster answers there "), err
    assert time.monotonic() - started < 30 and not (tmp_path / "x.cfsm").exists()
