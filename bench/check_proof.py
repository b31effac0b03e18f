"""Benchmark: proving time against checking time of proof certificates, per unsat ACAS Xu (or acasxu-hard) instance.

For each unsat instance of instances.csv, prove it with `certfsm.verify.check` (the default engine, all
cores), write its certificate (`certfsm.verify.write_certificate`) and check it with the independent
checker (`certfsm.checker.check_certificate`, one process). Prints a Markdown table: prove and check
seconds, leaves, certificate size, the outcome, and the sums.

    python bench/check_proof.py [--only 1_4,prop_2] [--timeout 116] [--set acasxu-hard]

The benchmark folder is read in place: $CERTFSM_ACASXU, else ../shared/benchmarks/<set> (acasxu by default).
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
    arguments = parser.parse_args()
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


if __name__ == "__main__":
    main()
