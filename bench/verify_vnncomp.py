"""Benchmark: `certfsm vnnlib-batch` over VNN-COMP instance lists, beside the tools' published times.

For each folder (a VNN-COMP benchmark with its `instances.csv`, read in
place from ../shared/benchmarks or given as a path) this runs the whole
list as one `certfsm vnnlib-batch` process, as a user would, and prints:
solved (sat or unsat), wrong (against the list's `expected` column),
invalid witnesses, unknown or error, the whole command's wall time and
the median instance time; then, from the folder's `published_times.csv`
when it has one, each tool's solved count and total time, raw (start-up
included) and without its start-up overhead. A witness is checked here
again, apart from certfsm's own validation: its point lies in the
property's box and onnxruntime's outputs at the float32 point satisfy a
disjunct of the unsafe set.

    python bench/verify_vnncomp.py [linearizenn cersyve acasxu rl ...] [--timeout-cap 120] [--jobs N]

The default folders are linearizenn and cersyve (VNN-COMP 2025).
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnxruntime

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO.parent / "shared" / "benchmarks"
SOLVED = ("sat", "unsat")


def folder_of(name: str) -> Path:
    path = Path(name)
    return path if path.is_dir() else BENCHMARKS / name


def run_folder(folder: Path, timeout_cap: float | None, jobs: int | None) -> dict:
    """Run the folder's list through `certfsm vnnlib-batch` and judge the results file."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "results.csv"
        command = [
            sys.executable,
            "-m",
            "certfsm.cli",
            "vnnlib-batch",
            str(folder / "instances.csv"),
            "--out",
            str(out),
        ]
        command += ["--no-progress"] + (["--timeout-cap", str(timeout_cap)] if timeout_cap else [])
        command += ["--jobs", str(jobs)] if jobs else []
        started = time.monotonic()
        finished = subprocess.run(command, capture_output=True, text=True)
        wall = time.monotonic() - started
        if finished.returncode not in (0, 1) or not out.exists():
            raise SystemExit(f"{folder}: vnnlib-batch exited {finished.returncode}: {finished.stderr.strip()[-500:]}")
        rows = list(csv.DictReader(out.open()))
        invalid = sum(1 for row in rows if row["verdict"] == "sat" and not witness_holds(folder, row, out.parent))
    expected = {
        (r["onnx"], r["vnnlib"]): r.get("expected", "") for r in csv.DictReader((folder / "instances.csv").open())
    }
    wrong = [
        row
        for row in rows
        if row["verdict"] in SOLVED
        and expected.get((row["onnx"], row["vnnlib"])) in SOLVED
        and row["verdict"] != expected[(row["onnx"], row["vnnlib"])]
    ]
    return {
        "instances": len(expected),
        "solved": sum(row["verdict"] in SOLVED for row in rows),
        "wrong": len(wrong),
        "invalid": invalid,
        "open": sum(row["verdict"] not in SOLVED for row in rows),
        "wall": wall,
        "median": statistics.median(float(row["seconds"]) for row in rows) if rows else float("nan"),
        "open_rows": [
            (row["onnx"], row["vnnlib"], row["verdict"], row["reason"][:100])
            for row in rows
            if row["verdict"] not in SOLVED
        ],
    }


def witness_holds(folder: Path, row: dict, results_folder: Path) -> bool:
    """The witness's point is in the box and onnxruntime's outputs there satisfy a disjunct (float64, no tolerance)."""
    from certfsm.verify import parse_vnnlib

    text = (results_folder / row["witness"]).read_text()
    values = {name: float(value) for name, value in re.findall(r"\((X_\d+|Y_\d+)\s+([^\s()]+)\)", text)}
    x = np.array([values[f"X_{i}"] for i in range(sum(k.startswith("X_") for k in values))])
    properties = parse_vnnlib(folder / row["vnnlib"], n_inputs=len(x))
    session = onnxruntime.InferenceSession(str(folder / row["onnx"]))
    feed = session.get_inputs()[0]
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in feed.shape]
    y = session.run(None, {feed.name: x.astype(np.float32).reshape(shape)})[0].reshape(-1).astype(np.float64)
    for prop in properties:
        if np.all(x >= prop.lower) and np.all(x <= prop.upper):
            for conjunction in prop.unsafe:
                if np.all(conjunction.A @ y <= conjunction.b):
                    return True
    return False


def published(folder: Path) -> dict:
    """Per tool: (solved, total raw seconds, total seconds without start-up) from published_times.csv.

    Only the newest competition run in the file counts (a list answered
    in two years, as linearizenn's, would otherwise count its shared
    instances twice).
    """
    path = folder / "published_times.csv"
    if not path.exists():
        return {}
    rows = list(csv.DictReader(path.open()))
    newest = max(row.get("results_run", "") for row in rows)
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0, 0.0])
    for row in rows:
        if row.get("scored", "yes") != "yes" or row.get("results_run", "") != newest:
            continue
        entry = totals[row["tool"]]
        entry[0] += row["result"] in SOLVED
        entry[1] += float(row["run_time_s"] or 0.0)
        entry[2] += float(row["run_time_minus_overhead_s"] or row["run_time_s"] or 0.0)
    return dict(totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", default=["linearizenn", "cersyve"])
    parser.add_argument("--timeout-cap", type=float, default=None)
    parser.add_argument("--jobs", type=int, default=None)
    arguments = parser.parse_args()
    print("| folder | instances | solved | wrong | invalid witnesses | unknown/error | wall (s) | median (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    results = {}
    for name in arguments.folders:
        folder = folder_of(name)
        result = results[name] = run_folder(folder, arguments.timeout_cap, arguments.jobs)
        print(
            f"| {name} | {result['instances']} | {result['solved']} | {result['wrong']} | {result['invalid']} | "
            f"{result['open']} | {result['wall']:.1f} | {result['median']:.2f} |",
            flush=True,
        )
    for name in arguments.folders:
        tools = published(folder_of(name))
        if tools:
            print(f"\n{name}, published (newest run): tool, solved, total raw (s), total without start-up (s)")
            for tool, (solved, raw, net) in sorted(tools.items(), key=lambda item: (-item[1][0], item[1][1])):
                print(f"  {tool:18} {solved:4d} {raw:10.1f} {net:10.1f}")
        for onnx_path, vnnlib, verdict, reason in results[name]["open_rows"]:
            print(f"  open: {onnx_path} {vnnlib}: {verdict} {reason}")


if __name__ == "__main__":
    main()
