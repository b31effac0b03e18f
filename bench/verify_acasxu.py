"""Benchmark: certfsm vnnlib against plain maraboupy on the ACAS Xu instances, side by side.

Each instance of instances.csv runs twice in the same session, one after
the other, each as a fresh process with the same timeout: `certfsm vnnlib`
(all cores, the default) and plain maraboupy (bench/plain_marabou.py, one
worker). Wall time of the whole process is compared, so both pay their
start-up. Prints a Markdown table (verdicts, times, ratio), solved counts,
wrong verdicts, and the median time ratio certfsm / Marabou.

    python bench/verify_acasxu.py [--timeout 116] [--only 1_4,prop_2] [--skip-marabou]

`--hard` instead runs the hard tail (../shared/benchmarks/acasxu-hard, or
$CERTFSM_ACASXU_HARD) and then the 25 development instances through
`certfsm vnnlib` only (`--engine` picks the engine, default auto), and
prints per instance certfsm's wall time next to the published VNN-COMP
2023 times of nnenum and alpha-beta-CROWN (`PUBLISHED`), with the boxes
bounded, the deepest split, the seconds given to falsification and the
share of the worker pool's time no task ran (read from the run's report).

The benchmark folder is read in place: $CERTFSM_ACASXU, else
../shared/benchmarks/acasxu beside the repository.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ANSWER = {"unsat": "unsat", "sat": "sat"}

# (network, property) -> (nnenum, alpha-beta-CROWN) run_time in seconds, VNN-COMP 2023, from
# ChristopherBrix/vnncomp2023_results (commit 3084a62), {nnenum,alpha_beta_crown}/2023_acasxu/results.csv:
# the competition's machines, each tool's start-up included. Every listed answer agrees with instances.csv.
PUBLISHED = {
    ("4_2", "prop_2"): (5.61, 58.49),
    ("3_3", "prop_2"): (5.26, 64.75),
    ("1_4", "prop_1"): (1.51, 8.18),
    ("1_9", "prop_1"): (1.39, 7.86),
    ("3_1", "prop_1"): (1.53, 8.16),
    ("3_2", "prop_1"): (1.47, 8.21),
    ("3_3", "prop_1"): (1.61, 8.11),
    ("1_1", "prop_2"): (1.60, 10.24),
    ("1_7", "prop_2"): (1.67, 8.59),
    ("2_3", "prop_2"): (1.11, 5.75),
    ("3_2", "prop_2"): (1.12, 7.34),
    ("3_4", "prop_2"): (1.10, 5.77),
    ("4_3", "prop_2"): (1.10, 5.74),
    ("4_8", "prop_2"): (1.10, 5.82),
    ("5_7", "prop_2"): (1.10, 5.76),
    ("1_7", "prop_3"): (1.10, 5.78),
    ("1_8", "prop_3"): (1.10, 5.78),
    ("2_4", "prop_3"): (0.90, 6.35),
    ("4_5", "prop_3"): (1.10, 6.68),
    ("4_8", "prop_3"): (1.16, 6.35),
    ("1_9", "prop_4"): (1.09, 5.80),
    ("3_3", "prop_4"): (1.09, 6.67),
    ("4_1", "prop_4"): (1.10, 6.42),
    ("5_6", "prop_4"): (1.11, 6.37),
    ("5_7", "prop_4"): (1.10, 6.67),
    ("1_9", "prop_7"): (31.47, 7.63),
    ("4_5", "prop_10"): (1.52, 11.40),
}


def benchmark_folder() -> Path:
    return Path(os.environ.get("CERTFSM_ACASXU", REPO.parent / "shared" / "benchmarks" / "acasxu"))


def hard_folder() -> Path:
    return Path(os.environ.get("CERTFSM_ACASXU_HARD", REPO.parent / "shared" / "benchmarks" / "acasxu-hard"))


def network_name(onnx: str) -> str:
    return Path(onnx).stem.replace("ACASXU_run2a_", "").replace("_batch_2000", "")


def run(command: list[str], timeout: float) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - started
    seconds = time.perf_counter() - started
    words = done.stdout.split()
    answer = words[0] if words else "error"
    if answer not in ("sat", "unsat", "timeout", "unknown"):
        answer = "error"
    return answer, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=116.0)
    parser.add_argument("--only", default="", help="comma-separated substrings of onnx/vnnlib names")
    parser.add_argument("--skip-marabou", action="store_true", help="run certfsm only")
    parser.add_argument(
        "--hard",
        action="store_true",
        help="the hard tail and the development set against published nnenum / alpha-beta-CROWN times",
    )
    parser.add_argument("--engine", default="auto", help="certfsm engine for --hard (auto or bounds)")
    args = parser.parse_args()
    if args.hard:
        return hard(args)
    folder = benchmark_folder()
    if not (folder / "instances.csv").exists():
        print(f"ACAS Xu benchmark not found in {folder}; set CERTFSM_ACASXU", file=sys.stderr)
        return 2
    with open(folder / "instances.csv") as stream:
        instances = list(csv.DictReader(stream))
    if args.only:
        keys = args.only.split(",")
        instances = [i for i in instances if any(k in i["onnx"] + i["vnnlib"] for k in keys)]
    rows = []
    print("| network | property | expected | certfsm | time (s) | Marabou | time (s) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for instance in instances:
        onnx_path, vnnlib_path = folder / instance["onnx"], folder / instance["vnnlib"]
        ours = run(
            [
                sys.executable,
                "-m",
                "certfsm.cli",
                "vnnlib",
                str(onnx_path),
                str(vnnlib_path),
                "--timeout",
                str(args.timeout),
            ],
            args.timeout,
        )
        theirs = (
            ("-", float("nan"))
            if args.skip_marabou
            else run(
                [
                    sys.executable,
                    str(REPO / "bench" / "plain_marabou.py"),
                    str(onnx_path),
                    str(vnnlib_path),
                    str(args.timeout),
                ],
                args.timeout,
            )
        )
        ratio = ours[1] / theirs[1] if theirs[1] == theirs[1] else float("nan")
        rows.append((instance, ours, theirs, ratio))
        name = network_name(instance["onnx"])
        print(
            f"| {name} | {Path(instance['vnnlib']).stem} | {instance['expected']} | {ours[0]} | "
            f"{ours[1]:.2f} | {theirs[0]} | {theirs[1]:.2f} | {ratio:.2f} |",
            flush=True,
        )

    def solved(index):
        return sum(r[index][0] in ("sat", "unsat") for r in rows)

    def wrong(index):
        return sum(r[index][0] in ("sat", "unsat") and r[index][0] != r[0]["expected"] for r in rows)

    ratios = [r[3] for r in rows if r[3] == r[3]]
    print()
    print(f"instances: {len(rows)}; timeout {args.timeout:g} s; {os.cpu_count()} cores")
    print(f"certfsm: solved {solved(1)}, wrong {wrong(1)}")
    if not args.skip_marabou:
        print(f"plain Marabou: solved {solved(2)}, wrong {wrong(2)}")
        print(f"median time ratio certfsm / Marabou: {statistics.median(ratios):.3f}")
    return 0 if wrong(1) == 0 else 1


def hard(args) -> int:
    """certfsm on the hard tail, then the development set, beside the published times; 0 when nothing is wrong."""
    groups = []
    for group, folder in (("hard", hard_folder()), ("dev", benchmark_folder())):
        if not (folder / "instances.csv").exists():
            print(f"{group}: no instances.csv in {folder}; skipped", file=sys.stderr)
            continue
        with open(folder / "instances.csv") as stream:
            instances = list(csv.DictReader(stream))
        if args.only:
            keys = args.only.split(",")
            instances = [i for i in instances if any(k in i["onnx"] + i["vnnlib"] for k in keys)]
        groups += [(group, folder, instance) for instance in instances]
    print(f"engine {args.engine}; timeout {args.timeout:g} s; {os.cpu_count()} cores")
    print(
        "| set | network | property | expected | certfsm | time (s) | boxes | depth | falsify (s) | idle % "
        "| nnenum (s) | ab-CROWN (s) | / nnenum |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wrong = 0
    for group, folder, instance in groups:
        name, prop = network_name(instance["onnx"]), Path(instance["vnnlib"]).stem
        with tempfile.TemporaryDirectory() as report:
            answer, seconds = run(
                [
                    sys.executable,
                    "-m",
                    "certfsm.cli",
                    "vnnlib",
                    str(folder / instance["onnx"]),
                    str(folder / instance["vnnlib"]),
                    "--timeout",
                    str(args.timeout),
                    "--engine",
                    args.engine,
                    "--no-progress",
                    "--report",
                    report,
                ],
                args.timeout,
            )
            stats = _report_stats(Path(report))
        wrong += answer in ("sat", "unsat") and answer != instance["expected"]
        nnenum, crown = PUBLISHED.get((name, prop), (float("nan"), float("nan")))
        idle = f"{100 * stats['worker_idle_share']:.0f}" if "worker_idle_share" in stats else "-"
        falsify = f"{stats['falsify_seconds']:.1f}" if "falsify_seconds" in stats else "-"
        print(
            f"| {group} | {name} | {prop} | {instance['expected']} | {answer} | {seconds:.2f} | "
            f"{stats.get('boxes', '-')} | {stats.get('max_depth', '-')} | "
            f"{falsify} | {idle} | {nnenum:.2f} | {crown:.2f} | "
            f"{seconds / nnenum:.2f} |",
            flush=True,
        )
    print(f"\nwrong verdicts: {wrong}")
    return 0 if wrong == 0 else 1


def _report_stats(folder: Path) -> dict:
    """The stats of the first property of a report folder, or {} when there is none (e.g. a crash)."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
        return summary["properties"][0].get("stats") or {}
    except (OSError, ValueError, KeyError, IndexError):
        return {}


if __name__ == "__main__":
    sys.exit(main())
