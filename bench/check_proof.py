"""Benchmark: proving time against checking time of proof certificates, per unsat ACAS Xu (or acasxu-hard) instance.

For each unsat instance of instances.csv, prove it with `certfsm.verify.check` (the default engine, all
cores), write its certificate (`certfsm.verify.write_certificate`) and check it with the independent
checker (`certfsm.checker.check_certificate`, one process). Prints a Markdown table: prove and check
seconds, leaves, certificate size, the outcome, and the sums.

    python bench/check_proof.py [--only 1_4,prop_2] [--timeout 116] [--set acasxu-hard]
    python bench/check_proof.py --example

The benchmark folder is read in place: $CERTFSM_ACASXU, else ../shared/benchmarks/<set> (acasxu by default).
With --example, the rows are instead the cell certificates of `certfsm distill` (one process): the
shipped example (one entry per exact cell), and the example with the bins of its first two inputs cut
in three and in two, whose some 32 000 exact cells stand for the many small boxes of a refined table
(distill keeps the proofs of tables of at most 20 000 cells; this row lifts that limit). "prove" is the
whole distillation.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated substrings of onnx/vnnlib names")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per property (default: the csv's)")
    parser.add_argument("--set", default="acasxu", help="benchmark folder under ../shared/benchmarks")
    parser.add_argument("--example", action="store_true", help="the example's cell certificates instead")
    arguments = parser.parse_args()
    if arguments.example:
        return examples()
    from certfsm import load_onnx
    from certfsm.checker import check_certificate
    from certfsm.verify import check, parse_vnnlib, write_certificate

    folder = Path(os.environ.get("CERTFSM_ACASXU", REPO.parent / "shared" / "benchmarks" / arguments.set))
    wanted = [w for w in arguments.only.split(",") if w]
    print("| instance | prove (s) | check (s) | leaves | certificate (KB) | outcome |")
    print("|---|---|---|---|---|---|")
    total_prove = total_check = 0.0
    checked = instances = 0
    with tempfile.TemporaryDirectory() as scratch:
        for row in csv.DictReader(open(folder / "instances.csv")):
            name = f"{Path(row['onnx']).stem.removeprefix('ACASXU_run2a_').removesuffix('_batch_2000')} {Path(row['vnnlib']).stem}"
            if row["expected"] != "unsat" or (wanted and not any(w in row["onnx"] + row["vnnlib"] for w in wanted)):
                continue
            network = load_onnx(folder / row["onnx"])
            properties = parse_vnnlib(folder / row["vnnlib"], n_inputs=network.n_inputs, n_outputs=network.n_outputs)
            started = time.perf_counter()
            timeout = arguments.timeout or float(row.get("timeout_s") or 116.0)
            instances += 1
            results = [check(network, p, timeout=timeout) for p in properties]
            proving = time.perf_counter() - started
            cert = Path(scratch) / f"{name.replace(' ', '_')}.cert.json"
            if not write_certificate(cert, network, properties, results):
                print(f"| {name} | {proving:.2f} | - | - | - | no certificate ({results[0].verdict}) |")
                continue
            outcome = check_certificate(cert, folder / row["onnx"])
            total_prove, total_check = total_prove + proving, total_check + outcome.seconds
            checked += outcome.ok
            verdict = "checked" if outcome.ok else f"FAILED: {outcome.failure[:80]}"
            size = cert.stat().st_size / 1024
            print(f"| {name} | {proving:.2f} | {outcome.seconds:.2f} | {outcome.leaves} | {size:.1f} | {verdict} |")
    print(f"| **sum** ({checked} of {instances} checked) | {total_prove:.2f} | {total_check:.2f} | | | |")


def examples() -> None:
    """Distil the example, then a finer grid of it, and check each cell certificate (see the module docstring)."""
    import json
    import shutil
    from fractions import Fraction

    from certfsm import load_spec
    from certfsm.checker import check_certificate
    from certfsm.examples import example_spec_path
    from certfsm.fsm import _cell_problem
    from certfsm.fsm._pipeline import distill_controller

    def finer(edges: list, parts: int, frac_bits: int) -> list:
        """Each bin cut in `parts` at points of the input's fixed-point grid."""
        grid, cuts = 2**frac_bits, []
        for lo, hi in zip(map(Fraction, map(str, edges)), map(Fraction, map(str, edges[1:]))):
            cuts += [lo] + [round((lo + (hi - lo) * i / parts) * grid) / Fraction(grid) for i in range(1, parts)]
        return [float(c) for c in sorted(set(cuts + [Fraction(str(edges[-1]))]))]

    source = example_spec_path("coadapt")
    print("| table | cells certified | prove (s) | check (s) | leaves | certificate (KB) | outcome |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copy(source.with_name("coadapt.onnx"), scratch)
        fine = json.loads(source.read_text())
        for feature, parts in zip(fine["inputs"][:2], (3, 2)):
            feature["edges"] = finer(feature["edges"], parts, feature.get("frac_bits", 0))
        (Path(scratch) / "fine.spec.json").write_text(json.dumps(fine))
        _cell_problem.CERTIFIED_CELLS_AT_MOST = 10**6
        for label, spec in (("example", source), ("example, finer grid", Path(scratch) / "fine.spec.json")):
            folder = Path(scratch) / label.replace(" ", "_").replace(",", "")
            started = time.perf_counter()
            run = distill_controller(load_spec(spec), out=folder / "t.cfsm", report=folder / "report", jobs=1)
            proving = time.perf_counter() - started
            entry = json.loads((folder / "report" / "summary.json").read_text())["cell_certificate"]
            cert = folder / "report" / entry["file"]
            outcome = check_certificate(cert, Path(scratch) / "coadapt.onnx")
            verdict = "checked" if outcome.ok else f"FAILED: {outcome.failure[:80]}"
            cells = f"{entry['certified_cells']} of {run.distillation.table.n_cells}"
            size = cert.stat().st_size / 1024
            print(
                f"| {label} | {cells} | {proving:.2f} | {outcome.seconds:.2f} | {outcome.leaves} | {size:.0f} | {verdict} |"
            )


if __name__ == "__main__":
    main()
