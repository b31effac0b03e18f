"""Benchmark: certfsm vnnlib against plain maraboupy on the ACAS Xu instances, side by side.

Each instance of instances.csv runs twice in the same session, one after
the other, each as a fresh process with the same timeout: `certfsm vnnlib`
(all cores, the default) and plain maraboupy (bench/plain_marabou.py, one
worker). Wall time of the whole process is compared, so both pay their
start-up. Prints a Markdown table (verdicts, times, ratio), solved counts,
wrong verdicts, and the median time ratio certfsm / Marabou.

    python bench/verify_acasxu.py [--timeout 116] [--only 1_4,prop_2] [--skip-marabou]

The benchmark folder is read in place: $CERTFSM_ACASXU, else
../shared/benchmarks/acasxu beside the repository.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ANSWER = {"unsat": "unsat", "sat": "sat"}


def benchmark_folder() -> Path:
    return Path(os.environ.get("CERTFSM_ACASXU", REPO.parent / "shared" / "benchmarks" / "acasxu"))


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
    args = parser.parse_args()
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
        ours = run([sys.executable, "-m", "certfsm.cli", "vnnlib", str(onnx_path), str(vnnlib_path),
                    "--timeout", str(args.timeout)], args.timeout)
        theirs = ("-", float("nan")) if args.skip_marabou else run(
            [sys.executable, str(REPO / "bench" / "plain_marabou.py"), str(onnx_path), str(vnnlib_path),
             str(args.timeout)], args.timeout)
        ratio = ours[1] / theirs[1] if theirs[1] == theirs[1] else float("nan")
        rows.append((instance, ours, theirs, ratio))
        name = Path(instance["onnx"]).stem.replace("ACASXU_run2a_", "").replace("_batch_2000", "")
        print(f"| {name} | {Path(instance['vnnlib']).stem} | {instance['expected']} | {ours[0]} | "
              f"{ours[1]:.2f} | {theirs[0]} | {theirs[1]:.2f} | {ratio:.2f} |", flush=True)

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


if __name__ == "__main__":
    sys.exit(main())
