"""Benchmark: the embedded runtime against a single onnxruntime call of the same network, side by side.

Distils the example once (into a temporary folder), then measures in one
process, interleaved in rounds so that load on the machine hits every
figure alike:

- `Controller.step` (binning, table, state machine, SLA monitor), per call,
  with every latency within the SLA (the monitor quiet, its usual state)
  and with one violation in every 8 cycles (two in each 16-cycle window:
  never breached, but the monitor's windows advance every cycle);
- the same without an SLA monitor, and the plain rule text it is the twin
  of (`Machine.cell_of` then `Machine.step`, no compiled binning, no step
  table, no lock), to show what the twins buy;
- the same with the audit log on, fsync every record / every 1 000 / on close;
- `Controller.decide_many` on a batch of 1 000 000 readings (decisions per second);
- the same `step` and `decide_many` on a refined table of the same spec
  (docs/design.md, "Box trees"), side by side with the flat table, and
  the ratio of their p50 and CPU per call (target: at most 1.3): the
  example distilled with a refine budget when `--refined` names that
  artifact (``certfsm distill --refine 8,64``), else a stress case, every
  cell of the example split into a full tree `--refine-depth` levels deep
  (default 4, 16 leaves a cell), each leaf keeping its cell's token where
  the leaf allows it;
- one onnxruntime inference of the example's network on one input (the
  per-call cost of running the network itself, with no certfsm).

Prints a Markdown table: p50 and p99 per call in microseconds, and the
ratio of onnxruntime's p50 to each; then the CPU time the calling thread
spent per call (the best round's mean) and the same ratio on it, which
other work on a loaded machine disturbs far less than wall-clock time. Every figure includes the harness's
own cost per call (a lambda call and two clock reads), shown on its own
row ("empty call") and not subtracted, so the ratios are conservative. Targets (issue: runtime): step at
least 5x faster than onnxruntime; decide_many at least 5 million per
second; step with logging (fsync every 1 000) no slower than onnxruntime.

    python bench/runtime.py [--calls 20000] [--rounds 5] [--refine-depth 4 | --refined ARTIFACT]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def _timed(function, arguments) -> tuple[list[float], float]:
    """Seconds per call of `function` over `arguments`, one wall-clock measurement per call, and the CPU seconds
    the calling thread spent over all of them (what the code costs, whatever else runs on the machine)."""
    times = []
    clock = time.perf_counter
    cpu_started = time.thread_time()
    for argument in arguments:
        started = clock()
        function(argument)
        times.append(clock() - started)
    return times, time.thread_time() - cpu_started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--refine-depth", type=int, default=4)
    parser.add_argument("--refined", type=Path, default=None)
    options = parser.parse_args()

    import onnxruntime

    from certfsm import load_spec, runtime
    from certfsm.examples import example_spec_path
    from certfsm.fsm import distill_controller

    folder = Path(tempfile.mkdtemp(prefix="certfsm-bench-runtime-"))
    spec = load_spec(example_spec_path("coadapt"))
    distill_controller(spec, out=folder / "example.cfsm", report=folder / "report", jobs=2)
    artifact = folder / "example.cfsm"

    rng = np.random.default_rng(0)
    lower = np.array([item.min for item in spec.inputs])
    upper = np.array([item.max for item in spec.inputs])
    readings = rng.uniform(lower, upper, size=(options.calls, len(lower)))
    rows = readings.tolist()
    metrics = {"latency_ms": 4.0}
    slow_every_8 = [{"latency_ms": 25.0 if k % 8 == 0 else 4.0} for k in range(len(rows))]
    paired = list(zip(rows, slow_every_8))

    options_ort = onnxruntime.SessionOptions()
    options_ort.intra_op_num_threads = options_ort.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(spec.model_path), options_ort, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    singles = [row.astype(np.float32)[None] for row in readings]

    plain = runtime.load(artifact)
    refined_artifact = options.refined or _refined_copy(artifact, folder / "refined.cfsm", options.refine_depth)
    refined = runtime.load(refined_artifact)
    refined_no_sla = runtime.load(refined_artifact, sla=False)
    no_sla = runtime.load(artifact, sla=False)
    violated = runtime.load(artifact)
    machine = plain.machine
    rule_state = [machine.initial_state()]

    def rule_text(reading):
        rule_state[0] = machine.step(rule_state[0], machine.cell_of(reading))[0]

    logged, writers = {}, []
    for label, every in (
        ("step + audit log, fsync every record", 1),
        ("step + audit log, fsync every 1 000", 1000),
        ("step + audit log, fsync on close", 0),
    ):
        controller = runtime.load(artifact)
        writer = runtime.open_audit(controller, folder / f"{every}.log", fsync_every=every)
        logged[label] = (controller, every)
        writers.append(writer)

    rows_label = (
        "onnxruntime, one input",
        "step (with the SLA monitor)",
        "step (with the SLA monitor, one violation in 8 cycles)",
        "step, no SLA monitor",
        "step, refined table (with the SLA monitor)",
        "step, refined table, no SLA monitor",
        "Machine.cell_of + Machine.step (no twins, no SLA)",
        *logged,
        "empty call (harness)",
    )
    samples: dict[str, list[float]] = {key: [] for key in rows_label}
    cpu: dict[str, list[float]] = {key: [] for key in rows_label}  # CPU seconds per call, one figure per round

    def measure(label, function, arguments) -> None:
        times, cpu_seconds = _timed(function, arguments)
        samples[label] += times
        cpu[label].append(cpu_seconds / len(arguments))

    batch = rng.uniform(lower, upper, size=(1_000_000, len(lower)))
    batch_seconds, batch_cpu, refined_batch_seconds = [], [], []
    for _ in range(options.rounds):
        measure("onnxruntime, one input", lambda x: session.run(None, {name: x}), singles)
        measure("step (with the SLA monitor)", lambda r: plain.step(r, metrics, 0.0), rows)
        measure(
            "step (with the SLA monitor, one violation in 8 cycles)", lambda p: violated.step(p[0], p[1], 0.0), paired
        )
        measure("step, no SLA monitor", lambda r: no_sla.step(r, None, 0.0), rows)
        measure("step, refined table (with the SLA monitor)", lambda r: refined.step(r, metrics, 0.0), rows)
        measure("step, refined table, no SLA monitor", lambda r: refined_no_sla.step(r, None, 0.0), rows)
        measure("Machine.cell_of + Machine.step (no twins, no SLA)", rule_text, rows)
        measure("empty call (harness)", lambda r: None, rows)
        for label, (controller, every) in logged.items():
            count = 500 if every == 1 else len(rows)
            measure(label, lambda r, c=controller: c.step(r, metrics, 0.0), rows[:count])
        started, cpu_started = time.perf_counter(), time.thread_time()
        plain.decide_many(batch)
        batch_seconds.append(time.perf_counter() - started)
        batch_cpu.append(time.thread_time() - cpu_started)
        started = time.perf_counter()
        refined.decide_many(batch)
        refined_batch_seconds.append(time.perf_counter() - started)
    for writer in writers:
        writer.close()

    reference = statistics.median(samples["onnxruntime, one input"])
    reference_cpu = min(cpu["onnxruntime, one input"])
    print(
        "| what | p50 (us) | p99 (us) | onnxruntime p50 / this p50 | CPU per call (us) | onnxruntime CPU / this CPU |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for label, values in samples.items():
        p50, p99, per_call = statistics.median(values), float(np.percentile(values, 99)), min(cpu[label])
        print(
            f"| {label} | {p50 * 1e6:.2f} | {p99 * 1e6:.2f} | {reference / p50:.1f} | {per_call * 1e6:.2f} | "
            f"{reference_cpu / per_call:.1f} |"
        )
    rate, cpu_rate = 1_000_000 / statistics.median(batch_seconds), 1_000_000 / min(batch_cpu)
    print(
        f"\ndecide_many: {rate / 1e6:.2f} million decisions per second (median of {options.rounds} batches "
        f"of 1 000 000; {cpu_rate / 1e6:.2f} million per CPU second in the best batch); on the refined table "
        f"{1 / statistics.median(refined_batch_seconds):.2f} million"
    )
    tree_count, leaf_count = len(refined.machine.refinement.cells), refined.machine.refinement.n_leaves
    print(
        f"\nrefined table: {tree_count} of {refined.machine.n_cells} cells refined into {leaf_count} leaves, depth "
        f"{max(t.depth for t in refined.machine.refinement.trees)}; refined / flat step (target at most 1.3):"
    )
    for flat_label, refined_label in (
        ("step (with the SLA monitor)", "step, refined table (with the SLA monitor)"),
        ("step, no SLA monitor", "step, refined table, no SLA monitor"),
    ):
        ratio = statistics.median(samples[refined_label]) / statistics.median(samples[flat_label])
        cpu_ratio = min(cpu[refined_label]) / min(cpu[flat_label])
        print(f"- {flat_label}: p50 {ratio:.2f}x, CPU per call {cpu_ratio:.2f}x")


def _refined_copy(artifact: Path, out: Path, depth: int) -> Path:
    """The artifact with every cell split into a full tree `depth` levels deep (fewer where the fixed-point grid
    runs out), each split at the grid point nearest the middle of the next input in turn; a leaf keeps its cell's
    token where its mask allows it, else proposes the conservative token. Written and loaded by the core."""
    import json
    import math
    from fractions import Fraction

    from certfsm import Box, leaf_allowed_mask, load_artifact, write_artifact
    from certfsm.machine import Machine

    loaded = load_artifact(artifact)
    machine = Machine.from_artifact(loaded)
    payload = json.loads(json.dumps(loaded.payload()))
    spec = loaded.stored_spec
    rules = [(r.lower, r.upper, r.forbidden) for r in spec.rules]
    legal = sum(1 << t for t in spec.legal)
    conservative = machine.params.conservative
    cells, trees, proposal, status, allowed = [], [], [], [], []
    table = payload["table"]
    for cell in range(machine.n_cells):
        lower, upper = machine.cell_bounds(cell)
        encoded: list = []
        leaves: list = []

        def grow(box: Box, level: int, cell: int = cell, encoded: list = encoded, leaves: list = leaves) -> None:
            for turn in range(len(box.intervals) if level < depth else 0):
                i = (level + turn) % len(box.intervals)
                side, bits = box.intervals[i], machine.frac_bits[i]
                middle = (side.low + side.high) / 2
                t = (
                    Fraction(math.floor(middle * (1 << bits)), 1 << bits)
                    if bits is not None
                    else Fraction(float(middle))
                )
                if side.low < t < side.high:
                    encoded.append(["split", i, int(t * (1 << bits)) if bits is not None else float(t)])
                    low, high = box.split(i, t)
                    grow(low, level + 1)
                    grow(high, level + 1)
                    return
            mask = leaf_allowed_mask(box, legal, rules)
            token = machine.proposal[cell] if mask >> machine.proposal[cell] & 1 else conservative
            encoded.append(["leaf", len(proposal) + len(leaves)])
            leaves.append((token, "e" if machine.exact[cell] else "c", mask))

        grow(Box.of_bounds(lower, upper, [hi == e[-1] for hi, e in zip(upper, machine.edges)]), 0)
        if len(leaves) < 2:
            continue
        cells.append(cell)
        trees.append(encoded)
        for token, kind, mask in leaves:
            proposal.append(token)
            status.append(kind)
            allowed.append(mask)
        table["proposal"][cell] = conservative
        table["status"] = table["status"][:cell] + "c" + table["status"][cell + 1 :]
    payload["spec"]["refine"] = {"max_depth": max(depth, 1), "max_leaves": max(2, 1 << depth)}
    table["refinement"] = {
        "version": 1,
        "cells": cells,
        "trees": trees,
        "proposal": proposal,
        "status": "".join(status),
        "allowed": allowed,
    }
    write_artifact(out, payload)
    return out


if __name__ == "__main__":
    main()
