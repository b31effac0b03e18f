"""Benchmark: the worker pool on Ray against the local process pool, on the ACAS Xu list and the example's distillation.

Starts one local Ray head in this process (`--num-cpus`, on 127.0.0.1;
stopped at the end, also on failure) and runs each row as a real
`certfsm` process, the Ray rows with ``--ray ADDRESS`` joining that head,
so the rows pay what a user pays except Ray's own start (timed once, on
its own line):

- acasxu batch: `certfsm vnnlib-batch` over the ACAS Xu instance list
  (`--timeout-cap`), on the process pool and on Ray, with 1 and 2 workers
  (`--jobs`); the figure is the batch's own wall time (what the command
  prints: from reading the list to the last row), and the process's;
- example distill: `certfsm distill --example` with 2 workers on each back
  end; the figures are the distillation's seconds (what the command
  prints) and the process's wall time.

Each row runs `--repeats` times, alternating the back ends, and reports
the median. Prints a Markdown table with Ray's overhead against the local
pool at the same number of workers, whether the verdicts (batch) and the
artifact bytes (distill) are identical, and the 1-minute load average
before and after (the machine may be shared).

    python bench/ray_scale.py [--repeats 3] [--timeout-cap 60] [--skip-distill]

Needs Ray (pip install "certfsm[ray]"). The ACAS Xu folder is read in
place: $CERTFSM_ACASXU, else ../shared/benchmarks/acasxu beside the
repository.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _acasxu() -> Path:
    return Path(os.environ.get("CERTFSM_ACASXU") or REPO.parent / "shared" / "benchmarks" / "acasxu")


def _certfsm(*args) -> tuple[float, str]:
    """Run ``certfsm ARGS`` in a fresh interpreter; (wall seconds, stdout). A failure ends the benchmark."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "certfsm.cli", *map(str, args)], capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"ray_scale: certfsm {' '.join(map(str, args))} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, done.stdout


def _batch(folder: Path, instances: Path, jobs: int, cap: float, ray: str | None, run: int) -> dict:
    out = folder / f"batch-{jobs}-{'ray' if ray else 'local'}-{run}.csv"
    wall, text = _certfsm(
        "vnnlib-batch", instances, "--out", out, "--jobs", jobs, "--timeout-cap", cap, "--no-progress",
        *(["--ray", ray] if ray else []),
    )  # fmt: skip
    seconds = float(re.search(r"this run \d+ instances in ([\d.]+) s wall", text)[1])
    rows = [line.split(",") for line in out.read_text().splitlines()[1:]]
    return {"seconds": seconds, "process": wall, "answer": sorted((r[0], r[1], r[2]) for r in rows)}


def _distill(folder: Path, jobs: int, ray: str | None, run: int) -> dict:
    name = f"distill-{jobs}-{'ray' if ray else 'local'}-{run}"
    wall, text = _certfsm(
        "distill", "--example", "--out", folder / f"{name}.cfsm", "--report", folder / name, "--jobs", jobs,
        "--no-progress", *(["--ray", ray] if ray else []),
    )  # fmt: skip
    seconds = float(re.search(r"undecided \d+; ([\d.]+) s", text)[1])
    digest = hashlib.sha256((folder / f"{name}.cfsm").read_bytes()).hexdigest()
    return {"seconds": seconds, "process": wall, "answer": digest}


def _start_ray(cpus: int) -> tuple[object, str, float]:
    # The single-machine path binds Ray to 127.0.0.1 (read when ray is imported); the rows inherit it.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        import ray
    except ImportError:
        sys.exit('ray_scale: Ray is not installed; pip install "certfsm[ray]"')
    started = time.monotonic()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    return ray, ray.get_runtime_context().gcs_address, time.monotonic() - started


def _row(case: str, workers: int, local: list[dict], on_ray: list[dict]) -> str:
    local_s = statistics.median(r["seconds"] for r in local)
    ray_s = statistics.median(r["seconds"] for r in on_ray)
    local_p = statistics.median(r["process"] for r in local)
    ray_p = statistics.median(r["process"] for r in on_ray)
    same = all(r["answer"] == local[0]["answer"] for r in local + on_ray)
    return (
        f"| {case} | {workers} | {local_s:.2f} | {ray_s:.2f} | {100 * (ray_s / local_s - 1):+.1f} % "
        f"| {local_p:.2f} | {ray_p:.2f} | {'yes' if same else 'NO'} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="ray_scale.py",
        description=__doc__.splitlines()[0],
        epilog="Prints a Markdown table; see the module docstring for what each row measures.",
    )
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each row (median reported).")
    parser.add_argument("--timeout-cap", type=float, default=60.0, help="Seconds at most per ACAS Xu instance.")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray head.")
    parser.add_argument("--skip-distill", action="store_true", help="Only the ACAS Xu batch rows.")
    args = parser.parse_args()
    acasxu = _acasxu()
    if not (acasxu / "instances.csv").exists():
        sys.exit(f"ray_scale: no ACAS Xu list at {acasxu}; set CERTFSM_ACASXU to its folder")
    load_before = os.getloadavg()[0]
    ray, address, ray_start = _start_ray(args.num_cpus)
    try:
        with tempfile.TemporaryDirectory(prefix="ray-scale-") as temporary:
            folder = Path(temporary)
            instances = acasxu / "instances.csv"
            count = len(instances.read_text().splitlines()) - 1
            lines = [
                "| case | workers | local pool s | Ray s | Ray overhead | local process s | Ray process s | same |"
            ]
            lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for jobs in (2, 1):
                local, on_ray = [], []
                for run in range(args.repeats):
                    local.append(_batch(folder, instances, jobs, args.timeout_cap, None, run))
                    on_ray.append(_batch(folder, instances, jobs, args.timeout_cap, address, run))
                lines.append(_row(f"acasxu batch ({count} instances)", jobs, local, on_ray))
            if not args.skip_distill:
                local, on_ray = [], []
                for run in range(args.repeats):
                    local.append(_distill(folder, 2, None, run))
                    on_ray.append(_distill(folder, 2, address, run))
                lines.append(_row("example distill (7200 cells)", 2, local, on_ray))
    finally:
        ray.shutdown()
    print("\n".join(lines))
    print(
        f"\nRay head start (ray.init, {args.num_cpus} CPUs, in this process): {ray_start:.1f} s; "
        f"median of {args.repeats} runs per row; 1-minute load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
