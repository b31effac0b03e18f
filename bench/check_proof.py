"""Benchmark: proving time against checking time of proof certificates, per unsat ACAS Xu (or acasxu-hard) instance.

For each unsat instance of instances.csv, prove it with `certfsm.verify.check` (the default engine, all
cores), write its certificate (`certfsm.verify.write_certificate`) and check it with the independent
checker (`certfsm.checker.check_certificate`, one process). Prints a Markdown table: prove and check
seconds, leaves, certificate size, the outcome, and the sums.

    python bench/check_proof.py [--only 1_4,prop_2] [--timeout 116] [--set acasxu-hard]
    python bench/check_proof.py --example

The benchmark folder is read in place: $CERTFSM_ACASXU, else ../shared/benchmarks/<set> (acasxu by default).
With --example, the rows are instead cell certificates of `certfsm distill` (one process): the shipped
example's (one entry per exact cell), the example's with the bins of its first input cut in two (14 400
cells, under distill's 20 000-cell limit for keeping proofs), and a synthetic one of some 31 000 entries
standing for the exact leaves of a refined table: each one-leaf entry of the example's cut in seven along
its widest input, keeping its unsafe set and proofs (sound on each part, so checked again there, and not
proved again). "prove" is the whole distillation.
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
    """Distil the example and a finer grid of it, cut the example's entries in seven, and check each certificate."""
    import json
    import shutil
    from fractions import Fraction

    from certfsm import load_spec
    from certfsm.checker import check_certificate
    from certfsm.examples import example_spec_path
    from certfsm.fsm import distill_controller

    def cut(document: dict, parts: int) -> dict:
        """Each entry whose proofs are one leaf, its box cut in `parts` along its widest input (see above)."""
        one_leaf = {j for j, proof in enumerate(document["proofs"]) if len(proof["tree"]) == 1}
        entries = []
        for entry in document["properties"]:
            box = [[Fraction(lo), Fraction(hi)] for lo, hi in entry["inputs"]]
            if not set(entry["proofs"]) <= one_leaf:
                entries.append(entry)
                continue
            dim = max(range(len(box)), key=lambda i: box[i][1] - box[i][0])
            ends = [box[dim][0] + (box[dim][1] - box[dim][0]) * k / parts for k in range(parts + 1)]
            for k in range(parts):
                inputs = [list(pair) for pair in entry["inputs"]]
                inputs[dim] = [str(ends[k]), str(ends[k + 1])]
                entries.append({**entry, "name": f"{entry['name']}, part {k}", "inputs": inputs})
        return {**document, "properties": entries}

    source = example_spec_path("coadapt")
    print("| certificate | entries (of cells) | prove (s) | check (s) | leaves | size (KB) | outcome |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        model = Path(shutil.copy(source.with_name("coadapt.onnx"), scratch))
        fine = json.loads(source.read_text())
        bins = fine["inputs"][0]["edges"]
        fine["inputs"][0]["edges"] = sorted(set(bins) | {(a + b) / 2 for a, b in zip(bins, bins[1:])})
        (Path(scratch) / "fine.spec.json").write_text(json.dumps(fine))
        certificates = []
        for label, spec in (
            ("example", source),
            ("example, first input's bins cut in two", model.parent / "fine.spec.json"),
        ):
            folder = Path(scratch) / str(len(certificates))
            started = time.perf_counter()
            run = distill_controller(load_spec(spec), out=folder / "t.cfsm", report=folder / "report", jobs=1)
            entry = json.loads((folder / "report" / "summary.json").read_text())["cell_certificate"]
            cells = f"{entry['certified_cells']} (of {run.distillation.table.n_cells})"
            certificates.append(
                (label, folder / "report" / entry["file"], cells, f"{time.perf_counter() - started:.2f}")
            )
        synthetic = Path(scratch) / "cut.cert.json"
        document = cut(json.loads(certificates[0][1].read_text()), 7)
        synthetic.write_text(json.dumps(document, sort_keys=True, separators=(",", ":")))
        certificates.append(("example's entries cut in seven", synthetic, str(len(document["properties"])), "-"))
        for label, cert, cells, proving in certificates:
            outcome = check_certificate(cert, model)
            verdict = "checked" if outcome.ok else f"FAILED: {outcome.failure[:80]}"
            size = cert.stat().st_size / 1024
            print(
                f"| {label} | {cells} | {proving} | {outcome.seconds:.2f} | {outcome.leaves} | {size:.0f} | {verdict} |"
            )


if __name__ == "__main__":
    main()
