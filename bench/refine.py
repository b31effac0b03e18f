"""Benchmark: refined tables against uniform grids of the same number of table entries.

For the embedded example (and ACAS Xu 1_1 over its whole domain with
``--acas``), each row runs the whole ``certfsm distill`` in a fresh
process, stderr piped, and reads its report:

- ``refined D,L``: the spec's grid refined with ``--refine D,L``; its
  table entries are the flat cells plus every leaf of the refined cells;
- ``uniform NxN..``: the same controller on an equal-width grid (``bins``
  on every input) with about as many cells as the largest refined row has
  entries, so that both tables cost about the same ROM.

Prints one Markdown table: table entries, exact share of the input volume
in all and per token, the wall time of distill and of the whole command,
and the peak memory of the process tree (sampled every second). Exactness
is what the certified machine answers with: outside exact cells and leaves
it answers the conservative token.

    python bench/refine.py [--acas] [--out-dir DIR] [--budgets 4,8 6,16 8,64]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distill import ACAS_NETWORK, benchmark_folder, tree_rss_bytes, write_spec  # noqa: E402

BUDGETS = ((4, 8), (6, 16), (8, 64))
REFINED_SAMPLES = 1_000_000
"""Random inputs of a refined row's cross-check (float64 and onnxruntime against the table): the issue's
million points, of which those in exact leaves are counted."""
ACAS_BUDGETS = ((6, 16),)


def run(spec: Path, name: str, out_dir: Path, refine: tuple[int, int] | None) -> dict:
    """One `certfsm distill` in a fresh process; the row read from its summary.json, with time and peak memory."""
    folder = out_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "certfsm.cli", "distill", str(spec), "--out", str(folder / "a.cfsm")]
    command += ["--report", str(folder / "report"), "--no-progress"]
    command += ["--refine", f"{refine[0]},{refine[1]}", "--samples", str(REFINED_SAMPLES)] if refine else []
    started, peak = time.perf_counter(), 0
    with open(folder / "stderr.log", "w", encoding="utf-8") as stderr:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        while child.poll() is None:
            peak = max(peak, tree_rss_bytes(child.pid))
            time.sleep(1.0)
    seconds = time.perf_counter() - started
    summary_path = folder / "report" / "summary.json"
    if child.returncode != 0 or not summary_path.exists():
        return {"name": name, "error": f"certfsm distill exit code {child.returncode}; see {folder / 'stderr.log'}"}
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    fidelity, refinement = summary["fidelity"], summary.get("refinement")
    if refinement:
        entries = fidelity["cells"] + refinement["leaves"] - refinement["cells_refined"]
        by_token = refinement["exact_volume_by_token"]
    else:
        entries = fidelity["cells"]
        by_token = flat_volume_by_token(spec, folder / "report" / "cells.jsonl")
    return {
        "name": name,
        "entries": entries,
        "exact": sum(by_token.values()),
        "by_token": by_token,
        "distill": summary["run"]["seconds"]["total"],
        "command": seconds,
        "peak_mb": peak / 2**20,
        "x_check": summary["cross_check"]["mismatches"],
        "samples": summary["cross_check"].get("samples", 0),
        "on_exact_leaves": summary["cross_check"].get("on_exact_leaves", 0),
    }


def flat_volume_by_token(spec: Path, cells_file: Path) -> dict[str, float]:
    """Per token, the share of the input volume in exact cells of a flat table (its cells.jsonl)."""
    from certfsm import load_spec

    inputs = load_spec(spec).inputs
    volume = {name: 0.0 for name in load_spec(spec).outputs}
    whole = math.prod(item.max - item.min for item in inputs)
    for text in cells_file.read_text(encoding="utf-8").splitlines():
        cell = json.loads(text)
        if cell["status"] == "exact":
            sides = (item.edges[b + 1] - item.edges[b] for item, b in zip(inputs, cell["bins"]))
            volume[cell["token"]] += math.prod(sides) / whole
    return volume


def uniform_spec(spec: Path, cells: int, folder: Path) -> tuple[Path, str]:
    """`spec` with equal-width bins on every input, about `cells` cells in all; its path and a name."""
    document = json.loads(spec.read_text(encoding="utf-8"))
    document["model"] = str((spec.parent / document["model"]).resolve())
    n = len(document["inputs"])
    bins = max(2, round(cells ** (1 / n)))
    for item in document["inputs"]:
        item.pop("edges", None)
        item["bins"] = bins
    name = "uniform " + "x".join([str(bins)] * n)
    path = folder / f"uniform-{bins}.spec.json"
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path, name


def case_rows(case: str, budgets, out_dir: Path) -> list[dict]:
    spec = write_spec(case, out_dir)
    rows = [run(spec, f"{case} flat", out_dir, None)]
    print(line(rows[0]), flush=True)
    for budget in budgets:
        rows.append(run(spec, f"{case} refined {budget[0]},{budget[1]}", out_dir, budget))
        print(line(rows[-1]), flush=True)
    largest = max((row.get("entries", 0) for row in rows), default=0)
    path, name = uniform_spec(spec, largest, out_dir)
    rows.append(run(path, f"{case} {name}", out_dir, None))
    print(line(rows[-1]), flush=True)
    return rows


def line(row: dict) -> str:
    if "error" in row:
        return f"| {row['name']} | error: {row['error']} |"
    tokens = ", ".join(f"{token} {100 * share:.2f}" for token, share in row["by_token"].items())
    return (
        f"| {row['name']} | {row['entries']:,} | {100 * row['exact']:.2f} | {tokens} | {row['distill']:.1f} | "
        f"{row['command']:.1f} | {row['peak_mb']:.0f} | {row['x_check']} of {row['samples']:,} "
        f"({row['on_exact_leaves']:,} in exact leaves) |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--acas",
        action="store_true",
        help="add ACAS Xu 1_1 (4x4x4x4x2 cells refined 6,16: about 40 minutes on 2 cores)",
    )
    parser.add_argument("--budgets", nargs="*", default=None, help="the example's DEPTH,LEAVES budgets")
    parser.add_argument("--out-dir", type=Path, default=None, help="keep specs, artifacts and reports here")
    args = parser.parse_args()
    budgets = [tuple(int(v) for v in b.split(",")) for b in args.budgets] if args.budgets else BUDGETS
    if args.acas and not (benchmark_folder() / ACAS_NETWORK).exists():
        print(f"ACAS Xu network {ACAS_NETWORK} not found in {benchmark_folder()}; set CERTFSM_ACASXU", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="certfsm-bench-refine-") as scratch:
        out_dir = Path(args.out_dir or scratch)
        out_dir.mkdir(parents=True, exist_ok=True)
        print(
            "| table | entries | exact % of volume | exact % per token | distill (s) | command (s) | peak MB | x-check mismatches |"
        )
        print("|---|---:|---:|---|---:|---:|---:|---:|")
        rows = case_rows("coadapt", budgets, out_dir)
        if args.acas:
            rows += case_rows("acasxu-small", ACAS_BUDGETS, out_dir)
    bad = [row for row in rows if "error" in row or row["x_check"]]
    return 1 if bad or not math.isfinite(sum(row.get("exact", 0) for row in rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
