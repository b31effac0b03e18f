"""Benchmark: certified distillation (`certfsm.fsm.distill`) on the embedded example and an ACAS Xu network.

Rows, each run in a fresh process (`--row NAME` re-invokes this script and
prints one JSON line), so a worker pool or BLAS state cannot leak from one
row into the next:

- coadapt: the shipped example at the grid of its spec, 1 and 2 jobs;
- coadapt-4bins: the same with 4 bins for the three utilisation inputs
  (temperature's and queue_depth's edges kept: the rule thresholds 85 and
  56 must stay edges), 1 and 2 jobs;
- acasxu-small: ACAS Xu network 1_1 over its whole normalised input
  domain, 4x4x4x4x2 cells, argmin, conservative token COC, 1 and 2 jobs;
- acasxu-full (with --acas-full): the same network at 17x8x8x2x2 cells (rho
  binned finely at close range, `CLOSE_RANGE_RHO`), 2
  jobs, run through the whole `certfsm distill` pipeline (distillation,
  proofs, 100,000-sample cross-check, report, artifact), then `certfsm
  inspect`; its row is read from the report's summary.json. Takes 15 to
  25 minutes on 2 cores (the table does not depend on the machine's load:
  cells are decided within work budgets, the timeout is only a guard).
- random5, random7 (with --random): the seeded random 2x32 ReLU
  controllers of `bench/controllers.py` (5 inputs x 10 bins = 100 000
  cells, 7 inputs x 6 bins = 279 936 cells), each through the whole
  `certfsm distill` with its default settings (all cores, no --timeout,
  the default checkpoint), stderr piped so that the progress lines show;
  the row adds the peak memory (the largest resident set of the whole
  process tree, sampled every second) and the number of progress lines.
  Several minutes each on 2 cores.

Prints a Markdown table (wall seconds of `distill` itself, cells per
second, exact and conservative shares, undecided cells, the shares decided
by bound propagation and without Marabou, Marabou queries, mismatches of a
100,000-sample cross-check, 1-minute load average before and after), the
speed-up of 1 job over 2 jobs per case, whether both runs built the same
table, and a second table of where the time went (seconds per phase, cells
per engine).

    python bench/distill.py [--timeout S] [--skip-acas]
    python bench/distill.py --acas-full --only acasxu-full --out-dir /tmp/bench_distill
    python bench/distill.py --random --only random5,random7 --out-dir /tmp/bench_random

The ACAS Xu folder is read in place: $CERTFSM_ACASXU, else
../shared/benchmarks/acasxu beside the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ACAS_NETWORK = "onnx/ACASXU_run2a_1_1_batch_2000.onnx"
ACAS_INPUTS = (
    ("rho", -0.3284228772, 0.6798577687),
    ("theta", -0.5, 0.5),
    ("psi", -0.5, 0.5),
    ("v_own", -0.5, 0.5),
    ("v_int", -0.5, 0.5),
)
"""The networks' normalised input domain (the envelope of properties 1 and 2; theta and psi widened from
+-0.499999896 there to +-0.5, i.e. +-pi after normalisation)."""
ACAS_OUTPUTS = ("COC", "WL", "WR", "SL", "SR")
_RHO_LOW, _RHO_CLOSE, _RHO_HIGH = -0.3284228772, -0.25, 0.6798577687
CLOSE_RANGE_RHO = tuple(
    [_RHO_LOW + (_RHO_CLOSE - _RHO_LOW) * k / 8 for k in range(8)]
    + [_RHO_CLOSE + (_RHO_HIGH - _RHO_CLOSE) * k / 9 for k in range(10)]
)
"""rho edges for the full grid: 8 bins below -0.25 (close range, where the advisories other than COC live)
and 9 above. Even these close-range cells hold no exact advisory: the advisories are thin bands in theta and
psi there, so every cell that holds one also holds another decision (the report's decision map shows it)."""
ACAS_BINS = {"acasxu-small": (4, 4, 4, 4, 2), "acasxu-full": (CLOSE_RANGE_RHO, 8, 8, 2, 2)}
"""Per input a number of equal bins or explicit edges."""
ROWS = (
    ("coadapt", 1),
    ("coadapt", 2),
    ("coadapt-4bins", 1),
    ("coadapt-4bins", 2),
    ("acasxu-small", 1),
    ("acasxu-small", 2),
)
FULL_ROW = ("acasxu-full", 2)
RANDOM_ROWS = (("random5", 0), ("random7", 0))
"""Through `certfsm distill` with its defaults: jobs 0 stands for "all cores" (no --jobs)."""
CROSS_CHECK_SAMPLES = 100_000


def benchmark_folder() -> Path:
    return Path(os.environ.get("CERTFSM_ACASXU", REPO.parent / "shared" / "benchmarks" / "acasxu"))


# ----------------------------------------------------------------- the specs


def write_spec(case: str, folder: Path) -> Path:
    """The spec file of `case`, written into `folder` (the shipped example is used in place)."""
    from certfsm.examples import example_spec_path

    shipped = example_spec_path("coadapt")
    if case == "coadapt":
        return shipped
    if case == "coadapt-4bins":
        document = json.loads(shipped.read_text(encoding="utf-8"))
        document["name"] = case
        document["model"] = str((shipped.parent / document["model"]).resolve())
        for item in document["inputs"]:
            if item["name"] in ("compute_util", "mem_bw_util", "l2_miss_rate"):
                item.pop("edges", None)
                item["bins"] = 4
    elif case in ACAS_BINS:
        document = {
            "certfsm_spec": 1,
            "name": case,
            "description": "ACAS Xu network 1_1 over its normalised input domain; the advisory is the minimal score.",
            "model": str((benchmark_folder() / ACAS_NETWORK).resolve()),
            "inputs": [
                {
                    "name": name,
                    "unit": "normalised",
                    "min": low,
                    "max": high,
                    **({"bins": bins} if isinstance(bins, int) else {"edges": list(bins)}),
                }
                for (name, low, high), bins in zip(ACAS_INPUTS, ACAS_BINS[case])
            ],
            "outputs": list(ACAS_OUTPUTS),
            "tokens": {token: code for code, token in enumerate(ACAS_OUTPUTS)},
            "legal_tokens": list(ACAS_OUTPUTS),
            "decision": "argmin",
            "conservative_token": "COC",
        }
    else:
        raise ValueError(f"unknown case {case!r}")
    path = folder / f"{case}.spec.json"
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------- one row, in its own process


def run_row(case: str, jobs: int, timeout: float | None) -> dict:
    """Distil `case` with `jobs` workers in this process; the stats that the table shows, as a dict."""
    from certfsm import load_onnx, load_spec
    from certfsm.fsm import distill, sampled_cross_check

    with tempfile.TemporaryDirectory(prefix="certfsm-bench-") as scratch:
        spec = load_spec(write_spec(case, Path(scratch)))
        network = load_onnx(spec.model_path)
        started = time.perf_counter()
        distillation = distill(spec, network, jobs=jobs, per_cell_timeout=timeout)
        wall = time.perf_counter() - started
        cross = sampled_cross_check(distillation, spec, network, n=CROSS_CHECK_SAMPLES)
    table = distillation.table
    digest = hashlib.sha256(table.proposal.astype("<i8").tobytes() + table.status.astype("i1").tobytes())
    return {
        **distillation.stats,
        "wall": wall,
        "grid": list(table.grid.shape),
        "mismatches": cross["mismatches"],
        "table_sha256": digest.hexdigest(),
    }


def tree_rss_bytes(root: int) -> int:
    """The resident set of process `root` and all its descendants, in bytes (Linux /proc; 0 elsewhere)."""
    parents, rss = {}, {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            parents[int(entry.name)] = int(fields[1])
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier += children
    return sum(rss.get(pid, 0) for pid in tree)


def run_random_row(case: str, out_dir: Path) -> tuple[dict, list[str]]:
    """`certfsm distill` with its default settings on a random controller, stderr piped; row and lines to show."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from controllers import write_case

    spec = write_case(case, out_dir / case)
    artifact, report = out_dir / case / f"{case}.cfsm", out_dir / case / "report"
    command = [
        sys.executable,
        "-m",
        "certfsm.cli",
        "distill",
        str(spec),
        "--out",
        str(artifact),
        "--report",
        str(report),
    ]
    log = out_dir / case / "stderr.log"
    started, peak = time.perf_counter(), 0
    with open(log, "w", encoding="utf-8") as stderr:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        while child.poll() is None:
            peak = max(peak, tree_rss_bytes(child.pid))
            time.sleep(1.0)
        stdout = child.stdout.read()
    seconds = time.perf_counter() - started
    progress = log.read_text(encoding="utf-8").splitlines()
    lines = ["$ certfsm " + " ".join(command[3:])] + stdout.splitlines()
    lines += [f"exit code {child.returncode}", f"{len(progress)} progress lines on stderr, e.g.:"]
    lines += [f"stderr: {line}" for line in progress[:2] + progress[len(progress) // 2 : len(progress) // 2 + 2]]
    lines += [f"stderr: {line}" for line in progress[-3:]]
    summary_path = report / "summary.json"
    if not summary_path.exists():
        return {"error": f"no {summary_path} (certfsm distill exit code {child.returncode})"}, lines
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    row = {
        **summary["fidelity"],
        **summary["engines"],
        **summary["run"],
        "wall": summary["run"]["seconds"]["total"],
        "command_seconds": seconds,
        "peak_rss_mb": peak / 2**20,
        "progress_lines": len(progress),
        "grid": [item["bins"] for item in summary["grid"]["inputs"]],
        "mismatches": summary["cross_check"]["mismatches"],
        "table_sha256": "",
        "overall": summary["overall"],
        "distill_exit": child.returncode,
        "inspect_exit": 0,
    }
    lines.append(
        f"whole command {seconds:.0f} s, distillation {row['wall']:.0f} s, peak memory of the process tree "
        f"{row['peak_rss_mb']:.0f} MB"
    )
    return row, lines


def guard_flags(timeout: float | None) -> list[str]:
    """--timeout S when a per-cell guard is asked for, else nothing (the work budgets alone end each cell)."""
    return [] if timeout is None else ["--timeout", f"{timeout:g}"]


def run_cli_row(timeout: float | None, out_dir: Path) -> tuple[dict, list[str]]:
    """`certfsm distill` on acasxu-full with 2 jobs, then `certfsm inspect`; the row and the lines to show."""
    spec = write_spec("acasxu-full", out_dir)
    artifact, report = out_dir / "acas.cfsm", out_dir / "acas-report"
    cli = [sys.executable, "-m", "certfsm.cli"]
    distill = [
        *cli,
        "distill",
        str(spec),
        "--out",
        str(artifact),
        "--report",
        str(report),
        "--jobs",
        "2",
        *guard_flags(timeout),
        "--no-progress",
    ]
    inspect = [*cli, "inspect", str(artifact), "--report", str(report)]
    lines = []
    for command in (distill, inspect):
        done = subprocess.run(command, capture_output=True, text=True)
        lines.append("$ certfsm " + " ".join(command[3:]))
        lines += done.stdout.splitlines() + [f"stderr: {line}" for line in done.stderr.splitlines()[-5:]]
        lines.append(f"exit code {done.returncode}")
        if command is distill:
            distill_code = done.returncode
        else:
            inspect_code = done.returncode
    summary_path = report / "summary.json"
    if not summary_path.exists():
        return {"error": f"no {summary_path} (certfsm distill exit code {distill_code})"}, lines
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    row = {
        **summary["fidelity"],
        **summary["engines"],
        **summary["run"],
        "wall": summary["run"]["seconds"]["total"],
        "grid": [item["bins"] for item in summary["grid"]["inputs"]],
        "mismatches": summary["cross_check"]["mismatches"],
        "table_sha256": "",
        "overall": summary["overall"],
        "distill_exit": distill_code,
        "inspect_exit": inspect_code,
    }
    return row, lines


# ----------------------------------------------------------------- the table


def measure(case: str, jobs: int, args) -> dict:
    """Run one row in a fresh process; adds process wall seconds and the load average before and after."""
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    if (case, jobs) == FULL_ROW:
        row, lines = run_cli_row(args.timeout, args.out_dir)
        row["lines"] = lines
    elif (case, jobs) in RANDOM_ROWS:
        row, lines = run_random_row(case, args.out_dir)
        row["lines"] = lines
    else:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--row",
            case,
            "--jobs",
            str(jobs),
            *guard_flags(args.timeout),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        try:
            row = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            row = {"error": f"exit code {done.returncode}: {tail}"}
    row.update(
        case=case,
        jobs_asked=jobs or row.get("jobs", 0),
        process=time.perf_counter() - started,
        load=(load_before, os.getloadavg()[0]),
    )
    return row


def table_line(row: dict) -> str:
    head = f"| {row['case']} | {row['jobs_asked']} |"
    if "error" in row:
        return head + f" error: {row['error']} |" + " |" * 11
    cells = row["cells"]
    return (
        head + f" {'x'.join(map(str, row['grid']))} | {cells:,} | {row['wall']:.1f} | {row['process']:.1f} | "
        f"{row['cells_per_second']:.1f} | {100 * row['exact_share']:.1f} | "
        f"{100 * (cells - row['exact']) / cells:.1f} | {row['undecided']} | {100 * row['bounds_share']:.1f} | "
        f"{100 * row['decided_without_marabou_share']:.1f} | {row['marabou_queries']} | {row['mismatches']} | "
        f"{row['load'][0]:.2f} -> {row['load'][1]:.2f} |"
    )


def phase_line(row: dict) -> str:
    if "error" in row:
        return f"| {row['case']} | {row['jobs_asked']} | error | | | | |"
    seconds = row["seconds"]
    engines = ", ".join(f"{name} {count}" for name, count in row["by_engine"].items())
    return (
        f"| {row['case']} | {row['jobs_asked']} | {seconds.get('sampling', 0):.1f} | "
        f"{seconds.get('bounds_in_workers', 0):.1f} | {seconds.get('engines_in_workers', 0):.1f} | "
        f"{row.get('engine_tasks', 0)} | {engines} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="a per-cell wall-clock guard in seconds (default: none, the work budgets alone end each cell, as "
        "certfsm distill does by default; the random rows always run with the defaults)",
    )
    parser.add_argument("--skip-acas", action="store_true", help="run the embedded example only")
    parser.add_argument(
        "--acas-full",
        action="store_true",
        help="add the 4,352-cell ACAS Xu row, through the whole certfsm distill pipeline (15-25 min)",
    )
    parser.add_argument(
        "--random",
        action="store_true",
        help="add the random 2x32 controllers of bench/controllers.py (100 000 and 279 936 cells), default settings",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated case names (coadapt, coadapt-4bins, acasxu-small, acasxu-full, random5, random7)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="keep the acasxu-full spec, artifact and report here (default: a temporary folder)",
    )
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        print(json.dumps(run_row(args.row, args.jobs, args.timeout)))
        return 0
    rows = list(ROWS) + ([FULL_ROW] if args.acas_full else []) + (list(RANDOM_ROWS) if args.random else [])
    if args.skip_acas:
        rows = [r for r in rows if not r[0].startswith("acasxu")]
    if args.only:
        rows = [r for r in rows if r[0] in args.only.split(",")]
    if not rows:
        print(
            f"no rows selected by --only {args.only!r} (acasxu-full also needs --acas-full, random5 and random7 "
            "--random); give one of coadapt, coadapt-4bins, acasxu-small, acasxu-full, random5, random7",
            file=sys.stderr,
        )
        return 2
    if any(case.startswith("acasxu") for case, _ in rows) and not (benchmark_folder() / ACAS_NETWORK).exists():
        print(
            f"ACAS Xu network {ACAS_NETWORK} not found in {benchmark_folder()}; set CERTFSM_ACASXU or give --skip-acas",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="certfsm-bench-") as scratch:
        args.out_dir = Path(args.out_dir or scratch)
        args.out_dir.mkdir(parents=True, exist_ok=True)
        return report(rows, args)


def report(rows: list[tuple[str, int]], args) -> int:
    print(
        f"{os.cpu_count()} cores; per-cell guard "
        + ("none (work budgets alone)" if args.timeout is None else f"{args.timeout:g} s")
        + "; wall = distill() itself, process = the "
        "whole fresh process; x-check = mismatches on exact cells in 100,000 random inputs\n"
    )
    print(
        "| case | jobs | grid | cells | wall (s) | process (s) | cells/s | exact % | conservative % | undecided "
        "| bounds % | no Marabou % | Marabou queries | x-check | load 1-min |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    done = []
    for case, jobs in rows:
        row = measure(case, jobs, args)
        done.append(row)
        print(table_line(row), flush=True)
    print()
    by_key = {(row["case"], row["jobs_asked"]): row for row in done if "error" not in row}
    for case in dict.fromkeys(case for case, _ in rows):
        one, two = by_key.get((case, 1)), by_key.get((case, 2))
        if one and two:
            same = "same table" if one["table_sha256"] == two["table_sha256"] else "DIFFERENT tables"
            print(
                f"{case}: speed-up 1 job / 2 jobs = {one['wall'] / two['wall']:.2f} "
                f"({one['wall']:.1f} s / {two['wall']:.1f} s); {same}"
            )
    print("\n| case | jobs | sampling (s) | bounds (worker s) | engines (worker s) | engine tasks | cells by engine |")
    print("|---|---|---|---|---|---|---|")
    for row in done:
        print(phase_line(row))
    failed = [row for row in done if "error" in row or row["mismatches"]]
    for row in done:
        if "lines" in row:
            print(
                f"\n{row['case']} through the CLI (exact by volume "
                f"{100 * row.get('exact_volume_share', float('nan')):.1f}%):"
            )
            print("\n".join(f"    {line}" for line in row["lines"]))
            if row.get("distill_exit") != 0 or row.get("inspect_exit") != 0:
                failed.append(row)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
