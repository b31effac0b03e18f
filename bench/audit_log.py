"""Benchmark: the audit log (`certfsm.runtime._audit`), per append and per verified record.

Rows, all in one process on the shipped example's shape (5 inputs, one
metric `latency_ms`, states and reasons as the machine step produces them):

- append, fsync every record / every 1000 records / on close only:
  microseconds per `AuditWriter.append_step` (median of 5 runs; the
  every-record row runs fewer records, it waits for the disk);
- step + append (fsync every 1000): `certfsm.machine.step`, the step
  function the runtime calls, on a precomputed stream of proposals and
  allowed rows, plus the append, per cycle (binning a reading to its
  cell is the runtime's and is not included);
- the single-input onnxruntime inference of the example network (one
  thread), the per-call cost the issue's target compares with;
- SHA-256 of one step frame alone (the cost of chaining per record);
- verify_log, read_log and export_jsonl: records per second.

    python bench/audit_log.py [--records 200000] [--dir DIR]

`--dir` puts the logs on the file system you mean to measure (the
default is a temporary folder); fsync costs depend on it entirely.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from certfsm.runtime import AuditWriter
from certfsm.runtime import export_jsonl, read_log, verify_log

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "certfsm" / "examples" / "coadapt.onnx"
INPUTS = ("compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth")
METRICS = ("latency_ms",)
SHA = hashlib.sha256(b"bench").hexdigest()


def stream(n: int, seed: int = 7) -> list[tuple]:
    """n cycles of inputs: a reading, a latency, a cell, a proposal and an allowed row (5 tokens)."""
    rng = random.Random(seed)
    cycles = []
    for _ in range(n):
        reading = (
            rng.uniform(0, 100),
            rng.uniform(0, 100),
            rng.uniform(0, 100),
            rng.uniform(20, 110),
            float(rng.randrange(65)),
        )
        allowed = tuple(rng.random() > 0.1 for _ in range(4)) + (False,)
        cycles.append(
            (
                reading,
                {"latency_ms": rng.uniform(5, 30)},
                rng.randrange(3000),
                rng.randrange(4),
                allowed,
                rng.random() > 0.05,
            )
        )
    return cycles


def time_appends(folder: Path, cycles, fsync_every: int, runs: int = 5) -> float:
    """Median microseconds per append_step over `runs` fresh logs (close excluded: it is paid once)."""
    from certfsm.machine import State

    state = State(0, -1, 0, 3)
    results = []
    for run in range(runs):
        writer = AuditWriter(folder / f"append-{fsync_every}-{run}", SHA, INPUTS, METRICS, fsync_every=fsync_every)
        append = writer.append_step
        start = time.perf_counter()
        for k, (reading, metrics, cell, proposal, _, sla_ok) in enumerate(cycles):
            append(k * 1e-3, reading, metrics, cell, proposal, proposal, 0, state, sla_ok, None)
        results.append((time.perf_counter() - start) / len(cycles) * 1e6)
        writer.close()
    return statistics.median(results)


def time_step_and_append(folder: Path, cycles, runs: int = 5) -> tuple[float, float]:
    """Median microseconds per cycle of the machine step alone, and of it followed by append_step (fsync every 1000)."""
    from certfsm.machine import MachineParams, initial_state, step

    params = MachineParams(
        n_tokens=5,
        conservative=0,
        confirm_cycles=3,
        cooldown_cycles=8,
        overridable=frozenset({0, 3}),
        codes=(0, 1, 2, 3, 4),
        legal=frozenset({0, 1, 2, 3}),
    )
    alone, logged = [], []
    for run in range(runs):
        state = initial_state(params)
        start = time.perf_counter()
        for reading, metrics, cell, proposal, allowed, sla_ok in cycles:
            state, token, reason = step(params, state, proposal, allowed, True, sla_ok)
        alone.append((time.perf_counter() - start) / len(cycles) * 1e6)
        writer = AuditWriter(folder / f"step-{run}", SHA, INPUTS, METRICS, fsync_every=1000)
        append, codes, state = writer.append_step, params.codes, initial_state(params)
        start = time.perf_counter()
        for k, (reading, metrics, cell, proposal, allowed, sla_ok) in enumerate(cycles):
            state, token, reason = step(params, state, proposal, allowed, True, sla_ok)
            append(k * 1e-3, reading, metrics, cell, token, codes[token], reason, state, sla_ok)
        logged.append((time.perf_counter() - start) / len(cycles) * 1e6)
        writer.close()
    return statistics.median(alone), statistics.median(logged)


def time_onnxruntime(calls: int = 20000) -> float | None:
    """Median microseconds of one single-input onnxruntime call of the example network (None without onnxruntime)."""
    try:
        import numpy as np
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(MODEL), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    x = np.array([[50.0, 40.0, 30.0, 60.0, 10.0]], dtype=np.float32)
    results = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            session.run(None, {name: x})
        results.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(results)


def time_sha256(folder: Path) -> float:
    """Microseconds to chain one step frame: SHA-256 over the previous hash and the frame body."""
    body = (folder / "append-1000-0").read_bytes()[-200:-32]
    chain, n = bytes(32), 200000
    start = time.perf_counter()
    for _ in range(n):
        hashlib.sha256(chain + body).digest()
    return (time.perf_counter() - start) / n * 1e6


def readers(path: Path) -> dict[str, float]:
    """Records per second of verify_log, read_log and export_jsonl over one log."""
    rates = {}
    for name, run in (
        ("verify_log", lambda: verify_log(path).records),
        ("read_log", lambda: sum(1 for _ in read_log(path))),
        ("export_jsonl", lambda: export_jsonl(path, os.devnull).records),
    ):
        start = time.perf_counter()
        records = run()
        rates[name] = records / (time.perf_counter() - start)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200000, help="records per buffered run (default 200000)")
    parser.add_argument("--dir", type=Path, default=None, help="where the logs go (default: a temporary folder)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        folder = Path(name)
        cycles = stream(args.records)
        rows = [
            ("append, fsync every record", time_appends(folder, cycles[:2000], 1), 2000),
            ("append, fsync every 1000 records", time_appends(folder, cycles, 1000), args.records),
            ("append, fsync on close only", time_appends(folder, cycles, 0), args.records),
        ]
        alone, logged = time_step_and_append(folder, cycles)
        rows += [
            ("machine step alone", alone, args.records),
            ("machine step + append, fsync every 1000", logged, args.records),
        ]
        ort = time_onnxruntime()
        if ort is not None:
            rows.append(("onnxruntime, one single-input inference", ort, 20000))
        rows.append(("SHA-256 of one step frame (the chaining)", time_sha256(folder), 200000))
        rates = readers(folder / "append-1000-0")
        size = (folder / "append-1000-0").stat().st_size
    print(
        f"audit log benchmark, {os.cpu_count()} cpus, load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; log folder on {args.dir or tempfile.gettempdir()}\n"
    )
    print("| operation | us per call | calls |")
    print("| --- | ---: | ---: |")
    for label, micros, calls in rows:
        print(f"| {label} | {micros:.2f} | {calls} |")
    print(
        f"\n{args.records} step records take {size} bytes ({size / args.records:.0f} per record, header and "
        "close included)\n"
    )
    print("| reader | records per second |")
    print("| --- | ---: |")
    for label, rate in rates.items():
        print(f"| {label} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
