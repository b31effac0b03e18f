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

    python bench/runtime.py [--calls 20000] [--rounds 5]
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
    batch_seconds, batch_cpu = [], []
    for _ in range(options.rounds):
        measure("onnxruntime, one input", lambda x: session.run(None, {name: x}), singles)
        measure("step (with the SLA monitor)", lambda r: plain.step(r, metrics, 0.0), rows)
        measure(
            "step (with the SLA monitor, one violation in 8 cycles)", lambda p: violated.step(p[0], p[1], 0.0), paired
        )
        measure("step, no SLA monitor", lambda r: no_sla.step(r, None, 0.0), rows)
        measure("Machine.cell_of + Machine.step (no twins, no SLA)", rule_text, rows)
        measure("empty call (harness)", lambda r: None, rows)
        for label, (controller, every) in logged.items():
            count = 500 if every == 1 else len(rows)
            measure(label, lambda r, c=controller: c.step(r, metrics, 0.0), rows[:count])
        started, cpu_started = time.perf_counter(), time.thread_time()
        plain.decide_many(batch)
        batch_seconds.append(time.perf_counter() - started)
        batch_cpu.append(time.thread_time() - cpu_started)
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
        f"of 1 000 000; {cpu_rate / 1e6:.2f} million per CPU second in the best batch)"
    )


if __name__ == "__main__":
    main()
