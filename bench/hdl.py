"""Benchmark: the hardware and C exports of the example and of a 512-cell ACAS Xu distillation.

Per case: the table's size; `certfsm export-verilog --check` (generic yosys
cells, iCE40 LUTs and block RAMs, nextpnr-ice40's fmax and the decisions per
second at that clock (one decision per clock), the formal equivalence's
time, Icarus simulation seconds per million test-bench steps); `certfsm
export-c --check` and the compiled C's decisions per second on random
fixed-point readings (gcc -O2, one core); next to it `certfsm.runtime`'s
`Controller.step_fixed` per call and one onnxruntime call of the network on
one input.

Cases: ``example`` (the shipped controller, distilled into a temporary
folder) and ``acasxu-small`` (ACAS Xu network 1_1, the 4x4x4x4x2 = 512-cell
grid of bench/distill.py, every input with frac_bits 16; distilled unless
``--acas-artifact`` names one already built, which takes about 2.5 minutes
on 2 cores).

    python bench/hdl.py [--random-steps 1000000] [--acas-artifact A.cfsm] [--skip-acas] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import distill as distill_bench  # noqa: E402  (the ACAS Xu spec of the distillation benchmark)

ACAS_FRAC_BITS = 16
TIMING_CALLS = 20_000
C_DECISIONS = 20_000_000
_TIMER = """/* bench/hdl.py: decisions per second of the exported C on pseudo-random fixed-point readings. */
#include <stdio.h>
#include <time.h>
#include "{name}.h"

int main(void)
{{
    static {name}_input readings[4096];
    {name}_state state;
    {name}_output out;
    uint32_t x = 2463534242u, sum = 0;
    long i;
    clock_t started;
    for (i = 0; i < 4096; i++) {{
{fill}
        readings[i].in_valid = 1;
        readings[i].sla_ok = (x % 64u) != 0;
        readings[i].override_request = 0;
        readings[i].override_code = 0;
    }}
    {name}_reset(&state, &out);
    started = clock();
    for (i = 0; i < {calls}L; i++) {{
        {name}_step(&state, &readings[i & 4095], &out);
        sum += out.token_code;
    }}
    printf("%.6f %u\\n", (double) (clock() - started) / CLOCKS_PER_SEC, (unsigned) sum);
    return 0;
}}
"""


def distil_acas(folder: Path) -> Path:
    """The 512-cell ACAS Xu artifact: bench/distill.py's acasxu-small spec with frac_bits on every input, its
    equal-width bins over the envelope widened outward to the nearest multiples of 2^-frac_bits (the fixed-point
    path takes only edges on its grid)."""
    spec_path = distill_bench.write_spec("acasxu-small", folder)
    spec = json.loads(spec_path.read_text())
    scale = 2**ACAS_FRAC_BITS
    for item in spec["inputs"]:
        low, high = math.floor(item["min"] * scale), math.ceil(item["max"] * scale)
        bins = item.pop("bins", None) or len(item.pop("edges")) - 1
        item["min"], item["max"] = low / scale, high / scale
        item["edges"] = [round(low + (high - low) * k / bins) / scale for k in range(bins + 1)]
        item["frac_bits"] = ACAS_FRAC_BITS
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")
    artifact = folder / "acasxu-small.cfsm"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "certfsm.cli",
            "distill",
            str(spec_path),
            "--out",
            str(artifact),
            "--report",
            str(folder / "acasxu-small-report"),
            "--jobs",
            "2",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
    )
    if not artifact.exists():
        raise SystemExit(f"certfsm distill of acasxu-small failed (exit {done.returncode}): {done.stderr[-400:]}")
    return artifact


def distil_example(folder: Path) -> Path:
    from certfsm import load_spec
    from certfsm.examples import example_spec_path
    from certfsm.fsm import distill_controller

    spec = load_spec(example_spec_path("coadapt"))
    distill_controller(spec, out=folder / "example.cfsm", report=folder / "example-report", jobs=2)
    return folder / "example.cfsm"


def c_decisions_per_second(hw, folder: Path) -> float:
    """Compile the exported C with a timing loop (gcc -O2) and return its decisions per second."""
    name = hw.module.name
    fill = []
    for bank in hw.banks:
        span = bank.high - bank.low + 3
        fill += [
            "        x ^= x << 13; x ^= x >> 17; x ^= x << 5;",
            f"        readings[i].{bank.bus.name} = (int32_t) ({bank.low - 1}L + (long) (x % {span}u));",
        ]
    (folder / "timer.c").write_text(_TIMER.format(name=name, fill="\n".join(fill), calls=C_DECISIONS))
    subprocess.run(["gcc", "-std=c99", "-O2", "-o", "timer", "timer.c", f"{name}.c"], cwd=folder, check=True)
    seconds = float(
        subprocess.run([str(folder / "timer")], capture_output=True, text=True, check=True).stdout.split()[0]
    )
    return C_DECISIONS / seconds


def per_call_seconds(function, arguments) -> float:
    times, clock = [], time.perf_counter
    for argument in arguments:
        started = clock()
        function(argument)
        times.append(clock() - started)
    return statistics.median(times)


def measure(case: str, artifact: Path, model: Path, folder: Path, random_steps: int) -> dict:
    import numpy as np
    import onnxruntime

    from certfsm import load_artifact, runtime
    from certfsm.hdl_export import export_c, export_verilog, hardware_of
    from certfsm.machine import Machine

    loaded = load_artifact(artifact)
    machine = Machine.from_artifact(loaded)
    exported = export_verilog(artifact, folder / "hdl", check=True, random_steps=random_steps)
    checks = exported.summary["checks"]
    c_export = export_c(artifact, folder / "c", check=True, random_steps=20_000)
    hw = hardware_of(machine, c_export.summary["module"])
    c_rate = c_decisions_per_second(hw, folder / "c")

    rng = random.Random(0)
    readings = [tuple(rng.randint(bank.low, bank.high) for bank in hw.banks) for _ in range(TIMING_CALLS)]
    controller = runtime.load(artifact, sla=False)
    step = per_call_seconds(controller.step_fixed, readings)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    shape = [1 if not isinstance(d, int) else d for d in session.get_inputs()[0].shape]
    lows = np.array([e[0] for e in machine.edges], dtype=np.float32)
    highs = np.array([e[-1] for e in machine.edges], dtype=np.float32)
    inputs = [
        np.random.default_rng(k).uniform(lows, highs).astype(np.float32).reshape(shape)
        for k in range(TIMING_CALLS // 4)
    ]
    onnx_call = per_call_seconds(lambda x: session.run(None, {name: x}), inputs)

    simulation = checks["simulation"]
    fmax = checks["place_and_route"].get("fmax_mhz", 0.0)
    return {
        "case": case,
        "cells": machine.n_cells,
        "grid": "x".join(map(str, machine.shape)),
        "table_bits": machine.n_cells * (hw.token_width + machine.params.n_tokens),
        "generic_cells": checks["synth_generic"].get("cells"),
        "luts": checks["synth_ice40"].get("luts"),
        "ram_blocks": checks["synth_ice40"].get("ram_blocks"),
        "fmax_mhz": fmax,
        "decisions_per_second_fmax": fmax * 1e6,
        "equivalence": checks["equivalence"]["verdict"],
        "equivalence_seconds": checks["equivalence"]["seconds"],
        "simulation_steps": simulation.get("steps"),
        "simulation_mismatches": simulation.get("mismatches"),
        "simulation_seconds_per_million": simulation["seconds"] / simulation["steps"] * 1e6,
        "c_mismatches": c_export.summary["checks"]["c_reference"]["mismatches"],
        "c_decisions_per_second": c_rate,
        "runtime_step_us": step * 1e6,
        "onnxruntime_call_us": onnx_call * 1e6,
        "all_checks_passed": exported.is_ok and c_export.is_ok,
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| case | cells | table + masks (bits) | generic cells | iCE40 LUT4 | iCE40 RAM blocks | fmax (MHz) | "
        "decisions/s at fmax | equivalence proof (s) | simulation (s per 1M steps) | C decisions/s | "
        "runtime step_fixed (us) | onnxruntime call (us) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} ({r['grid']}) | {r['cells']:,} | {r['table_bits']:,} | {r['generic_cells']:,} | "
            f"{r['luts']:,} | {r['ram_blocks']} | {r['fmax_mhz']:.1f} | "
            f"{r['decisions_per_second_fmax'] / 1e6:.0f} M | {r['equivalence_seconds']:.1f} "
            f"({r['equivalence']}) | {r['simulation_seconds_per_million']:.1f} | "
            f"{r['c_decisions_per_second'] / 1e6:.0f} M | {r['runtime_step_us']:.2f} | "
            f"{r['onnxruntime_call_us']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-steps", type=int, default=1_000_000)
    parser.add_argument("--acas-artifact", type=Path)
    parser.add_argument("--skip-acas", action="store_true")
    parser.add_argument("--out-dir", type=Path)
    options = parser.parse_args()
    out = options.out_dir or Path(tempfile.mkdtemp(prefix="certfsm-bench-hdl-"))
    out.mkdir(parents=True, exist_ok=True)
    from certfsm import load_spec
    from certfsm.examples import example_spec_path

    cases = [("example", distil_example(out), load_spec(example_spec_path("coadapt")).model_path)]
    if not options.skip_acas:
        acas = options.acas_artifact
        if acas is None and distill_bench.benchmark_folder().exists():
            acas = distil_acas(out)
        if acas is not None:
            cases.append(("acasxu-small", acas, distill_bench.benchmark_folder() / distill_bench.ACAS_NETWORK))
        else:
            print(f"ACAS Xu skipped: {distill_bench.benchmark_folder()} not found (set CERTFSM_ACASXU)")
    rows = []
    for case, artifact, model in cases:
        started = time.perf_counter()
        row = measure(case, artifact, model, out / case, options.random_steps)
        row["bench_seconds"] = time.perf_counter() - started
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(table(rows))
    print(
        f"\nsimulation: {options.random_steps:,} random steps on top of the structured vectors, 0 mismatches "
        f"required; every row's checks passed: {all(r['all_checks_passed'] for r in rows)}; folder {out}"
    )


if __name__ == "__main__":
    main()
