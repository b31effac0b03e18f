"""The pool's Ray back end against a real local Ray: the same answers and bytes as the process pool, and its faults.

Why: a batch or a distillation that runs on a cluster must say exactly
what it says on one machine (the verdicts, the artifact's bytes, which
`inspect --deep` then re-proves on Ray too), whatever the number of
workers and whichever finished first; a worker killed
mid-run must cost a retry, never a missing or doubled row; a task that
dies on every try must end the run by name, leaving no artifact.

One Ray head per module (two CPUs, on 127.0.0.1, stopped at the end even
when a test fails); the tests share it, so they run in one xdist worker.
A worker is found by the title Ray gives its process while it runs a
task (``ray::`` and the task's name, which `RayPool` makes from the
task's label) and killed with SIGKILL.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from certfsm import EngineError
from certfsm.examples import example_spec_path
from certfsm.verify import ray_workers, run_batch
from cli_run import one_line_error, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

ACASXU_ROWS = 4
"""ACAS Xu instances in the batch tests: the list's first ones, a second or two each (capped at 30 s)."""


@pytest.fixture(scope="module")
def ray_head():
    """A local Ray head for the module (2 CPUs, on loopback): its address; shut down after the last test."""
    saved = {name: os.environ.get(name) for name in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_USAGE_STATS_ENABLED")}
    # Ray's node address is the machine's own unless it takes the single-machine path, which binds to 127.0.0.1.
    # Ray reads the switch from the environment when it is imported (the drivers and workers started from here
    # inherit it); this process may have imported Ray already (a test that imports every module), so its copy of
    # the switch is set too.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray = pytest.importorskip("ray", reason='Ray is not installed (pip install "certfsm[ray]")')
    from ray._private import ray_constants

    switch = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        assert address.startswith("127.0.0.1:"), address
        yield address
    finally:
        ray.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = switch
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _acasxu_list(acasxu: Path, folder: Path) -> Path:
    """The first `ACASXU_ROWS` instances of the ACAS Xu list, paths made absolute, in `folder`/instances.csv."""
    lines = (acasxu / "instances.csv").read_text().splitlines()
    rows = [line.split(",") for line in lines[1 : 1 + ACASXU_ROWS]]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "instances.csv"
    text = [lines[0]] + [",".join([str(acasxu / r[0]), str(acasxu / r[1]), *r[2:]]) for r in rows]
    path.write_text("\n".join(text) + "\n")
    return path


def _verdicts(results: Path) -> dict[tuple[str, str], str]:
    rows = [line.split(",") for line in results.read_text().splitlines()[1:]]
    return {(row[0], row[1]): row[2] for row in rows}


def _ray_workers_titled(prefix: str) -> dict[int, str]:
    """{pid: title} of the Ray workers running a task whose name starts with `prefix`.

    Ray titles a worker ``ray::<task name>`` while it runs the task; the
    solver children a task forks inherit the title, so a process whose
    parent bears the same title is left out: only the worker is named.
    """
    titles, parents, every_parent = {}, {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            every_parent[int(entry.name)] = parent
            if title.startswith("ray::" + prefix):
                titles[int(entry.name)], parents[int(entry.name)] = title, parent
    return {
        pid: title
        for pid, title in titles.items()
        if parents[pid] not in titles and _descends_from_this_process(pid, every_parent)
    }


def _descends_from_this_process(pid: int, parents: dict[int, int]) -> bool:
    """Whether `pid` is a worker of the head this process started (`ray.init` spawns it as a child): another
    xdist worker's Ray tests, if they run beside these, have workers with the same titles, never to be killed."""
    seen = set()
    while pid in parents and pid not in seen:
        seen.add(pid)
        pid = parents[pid]
        if pid == os.getpid():
            return True
    return False


def _kill_while(running, prefix: str, *, times: int | None = None) -> list[str]:
    """SIGKILL the workers of one task, the first seen whose name starts with `prefix`, each time it runs again,
    while `running()` (at most `times` kills); the titles killed."""
    killed: dict[int, str] = {}
    target = None
    while running() and (times is None or len(killed) < times):
        for pid, title in _ray_workers_titled(prefix).items():
            target = target or title
            if title == target and pid not in killed and (times is None or len(killed) < times):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed[pid] = title
                except ProcessLookupError:
                    pass
        time.sleep(0.02)
    return list(killed.values())


def test_an_acasxu_batch_answers_the_same_on_ray_and_on_the_process_pool(ray_head, acasxu, tmp_path):
    instances = _acasxu_list(acasxu, tmp_path)
    code, out, err = run_cli(
        "vnnlib-batch", instances, "--out", tmp_path / "local.csv", "--jobs", 2, "--timeout-cap", 30, "--no-progress"
    )
    assert code == 0, err
    code, out, err = run_cli(
        "vnnlib-batch", instances, "--out", tmp_path / "ray.csv", "--jobs", 1, "--timeout-cap", 30, "--no-progress",
        "--ray", ray_head,
    )  # fmt: skip
    assert code == 0, err
    local, on_ray = _verdicts(tmp_path / "local.csv"), _verdicts(tmp_path / "ray.csv")
    assert len(local) == ACASXU_ROWS and on_ray == local
    assert "known answers: 4 compared, 0 wrong" in out


def test_the_example_distils_to_the_same_bytes_on_ray_as_on_the_process_pool_and_re_proves_there(ray_head, tmp_path):
    artifacts = {}
    for name, flags in (("local", ["--jobs", 2]), ("ray1", ["--jobs", 1, "--ray", ray_head])):
        out = tmp_path / f"{name}.cfsm"
        code, _, err = run_cli(
            "distill", "--example", "--out", out, "--report", tmp_path / name, "--no-progress", *flags
        )
        assert code == 0, err
        artifacts[name] = out.read_bytes()
    assert artifacts["ray1"] == artifacts["local"]
    model = Path(example_spec_path("coadapt")).parent / "coadapt.onnx"
    code, out, err = run_cli(
        "inspect", tmp_path / "ray1.cfsm", "--report", tmp_path / "ray1", "--deep", "--model", model, "--jobs", 2,
        "--no-progress", "--ray", ray_head,
    )  # fmt: skip
    assert code == 0 and "deep: ok: everything re-proved" in out, out + err


def test_a_worker_killed_mid_batch_costs_a_retry_and_every_instance_is_answered_once(ray_head, acasxu, tmp_path):
    instances = _acasxu_list(acasxu, tmp_path)
    expected = _verdicts_of_list(instances)
    outcome: dict = {}

    def batch():
        try:
            with ray_workers(ray_head):
                outcome["run"] = run_batch(instances, tmp_path / "ray.csv", jobs=2, timeout_cap=30)
        except BaseException as error:  # the test thread reports it
            outcome["error"] = error

    thread = threading.Thread(target=batch)
    thread.start()
    killed = _kill_while(thread.is_alive, "certfsm vnnlib-batch: the instance task", times=1)
    thread.join(300)
    assert "error" not in outcome, outcome.get("error")
    assert len(killed) == 1
    rows = (tmp_path / "ray.csv").read_text().splitlines()[1:]
    assert sorted((r.split(",")[0], r.split(",")[1]) for r in rows) == sorted(expected)
    assert _verdicts(tmp_path / "ray.csv") == expected


def _verdicts_of_list(instances: Path) -> dict[tuple[str, str], str]:
    rows = [line.split(",") for line in instances.read_text().splitlines()[1:]]
    return {(row[0], row[1]): row[3] for row in rows}


def test_an_instance_whose_worker_dies_on_every_try_ends_the_batch_naming_it(ray_head, acasxu, tmp_path):
    instances = _acasxu_list(acasxu, tmp_path)
    onnx, vnnlib = instances.read_text().splitlines()[1].split(",")[:2]
    outcome: dict = {}

    def batch():
        try:
            with ray_workers(ray_head):
                run_batch(instances, tmp_path / "ray.csv", jobs=1, timeout_cap=30)
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=batch)
    thread.start()
    killed = _kill_while(thread.is_alive, f"certfsm vnnlib-batch: the instance task of instance {onnx} {vnnlib}")
    thread.join(120)
    error = outcome.get("error")
    assert isinstance(error, EngineError) and len(killed) == 4, (error, killed)
    assert re.match(
        rf"the instance task of instance {re.escape(onnx)} {re.escape(vnnlib)} \(vnnlib-batch\) lost its Ray worker "
        r"on each of its 4 tries",
        str(error),
    ), str(error)
    assert not (tmp_path / "ray.csv").read_text().splitlines()[1:]


def test_a_distillation_whose_workers_keep_dying_exits_2_naming_a_cell_and_writes_no_artifact(ray_head, tmp_path):
    out = tmp_path / "example.cfsm"
    command = [sys.executable, "-m", "certfsm.cli", "distill", "--example", "--out", str(out), "--report",
               str(tmp_path / "report"), "--jobs", "2", "--no-progress", "--ray", ray_head]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        killed = _kill_while(lambda: process.poll() is None, "certfsm distillation: ")
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    task = re.match(r"ray::certfsm distillation: the (\w+) task of (.*)", killed[0])
    assert task and len(killed) == 4, killed
    assert one_line_error(
        process.returncode,
        err,
        rf"certfsm: error: the {task[1]} task of {re.escape(task[2])} \(distillation\) lost its Ray worker on each "
        r"of its 4 tries",
    ), err
    assert not out.exists()


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_ray_asked_for_without_ray_installed_is_one_line_naming_the_extra(tmp_path, how):
    """Ray hidden from the import system in a fresh interpreter: --ray (or $CERTFSM_RAY) fails before any work, exit 2."""
    flag = ", '--ray', 'auto'" if how == "flag" else ""
    program = (
        "import sys; sys.modules['ray'] = None\n"
        "from certfsm.cli import main\n"
        f"sys.exit(main(['distill', '--example', '--out', {str(tmp_path / 'x.cfsm')!r}{flag}]))\n"
    )
    environment = dict(os.environ, CERTFSM_RAY="auto") if how == "environment" else None
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=environment)
    assert one_line_error(
        done.returncode, done.stderr, r'certfsm: error: --ray auto runs the workers on Ray, which is not installed .*'
        r'pip install "certfsm\[ray\]"$'
    ), done.stderr  # fmt: skip
    assert not (tmp_path / "x.cfsm").exists()
