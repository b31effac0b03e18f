"""Benchmark: `certfsm inspect --deep` on the embedded example and on the 512-cell ACAS Xu table.

Each case is distilled once with `certfsm distill` (2 jobs; the ACAS Xu
case is `bench/distill.py`'s acasxu-small: network 1_1 over its whole
normalised input domain, 4x4x4x4x2 cells, argmin, COC conservative),
then `certfsm inspect C.cfsm --deep --model M.onnx --report DIR` runs in
a fresh process and is timed from outside (wall seconds of the whole
command: loading, the plain checks, the deep re-proof). The phase times
are the ones the command prints.

    python bench/deep_inspect.py [--skip-acas] [--jobs 2] [--out-dir DIR]

With --out-dir an existing artifact and report there are reused (the
distillation is not timed here; `bench/distill.py` measures it).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import distill as distill_bench  # noqa: E402  (the ACAS Xu spec lives there, once)

CASES = ("example", "acasxu-small")


def prepare(case: str, folder: Path) -> tuple[Path, Path, Path]:
    """(artifact, report folder, model) of `case`, distilled into `folder` unless already there."""
    artifact, report = folder / f"{case}.cfsm", folder / f"{case}-report"
    cli = [sys.executable, "-m", "certfsm.cli", "distill"]
    if case == "example":
        from certfsm.examples import example_spec_path

        spec = example_spec_path("coadapt")
        command = [*cli, "--example"]
    else:
        spec = distill_bench.write_spec(case, folder)
        command = [*cli, str(spec)]
    if not (artifact.exists() and (report / "cells.jsonl").exists()):
        done = subprocess.run(
            [*command, "--out", str(artifact), "--report", str(report), "--jobs", "2", "--no-progress"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(
                f"certfsm distill {case} failed (exit {done.returncode}): {done.stdout[-500:]}{done.stderr[-500:]}"
            )
    import json

    document = json.loads(Path(spec).read_text(encoding="utf-8"))
    return artifact, report, (Path(spec).parent / document["model"]).resolve()


def measure(case: str, folder: Path, jobs: int) -> dict:
    artifact, report, model = prepare(case, folder)
    command = [
        sys.executable,
        "-m",
        "certfsm.cli",
        "inspect",
        str(artifact),
        "--deep",
        "--model",
        str(model),
        "--report",
        str(report),
        "--jobs",
        str(jobs),
        "--no-progress",
    ]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    out = done.stdout

    def number(pattern: str) -> str:
        match = re.search(pattern, out)
        return match.group(1) if match else "?"

    return {
        "case": case,
        "exit": done.returncode,
        "wall": wall,
        "load": (load_before, os.getloadavg()[0]),
        "grid": number(r"grid: (.*?) = "),
        "cells": number(r"= (\d+) cells"),
        "exact": number(r"re-proved against the model: (\d+ of \d+)"),
        "engines": number(r"re-proved against the model: \d+ of \d+ \((.*?)\) in"),
        "cells_s": number(r"re-proved against the model: .* in ([\d.]+) s"),
        "witnesses": number(r"witness pairs re-validated exactly, in float64 and in onnxruntime: (\d+ of \d+)"),
        "witnesses_s": number(r"held back by the rules\): \d+ \(([\d.]+) s\)"),
        "queries": number(r"equal to the certificate and the report's files: (\d+)"),
        "queries_s": number(r"enumeration agrees: \w+ \(([\d.]+) s\)"),
        "verdict": number(r"^deep: (ok|FAILED)")
        if re.search(r"^deep: ", out, re.MULTILINE)
        else (out + done.stderr).strip().splitlines()[-1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-acas", action="store_true", help="the embedded example only")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for inspect --deep")
    parser.add_argument("--out-dir", type=Path, help="keep (and reuse) the artifacts and reports here")
    args = parser.parse_args()
    cases = [c for c in CASES if not (args.skip_acas and c.startswith("acasxu"))]
    if "acasxu-small" in cases and not (distill_bench.benchmark_folder() / distill_bench.ACAS_NETWORK).exists():
        print(
            f"ACAS Xu network not found under {distill_bench.benchmark_folder()}; set CERTFSM_ACASXU or give "
            "--skip-acas",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="certfsm-bench-deep-") as scratch:
        folder = args.out_dir or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        rows = [measure(case, folder, args.jobs) for case in cases]
    print(
        "| case | grid | cells | exact cells re-proved | how | cells (s) | witnesses re-validated | witnesses (s) "
        "| queries equal | queries (s) | wall (s) | exit | load before/after |"
    )
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['grid']} | {r['cells']} | {r['exact']} | {r['engines']} | {r['cells_s']} | "
            f"{r['witnesses']} | {r['witnesses_s']} | {r['queries']} of 11 | {r['queries_s']} | {r['wall']:.1f} | "
            f"{r['exit']} | {r['load'][0]:.1f}/{r['load'][1]:.1f} |"
        )
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
