"""Write the example's recorded trace, deterministically: ``python -m certfsm.examples.make_trace``.

`coadapt.trace.csv` is what `certfsm run example.cfsm --probe
example-trace` replays: 2 000 cycles of the five probe readings of the
co-adaptation controller's spec and a `latency_ms` metric for its SLA,
shaped to walk the machine through its rules: load waves that move the
table between tokens (switches wait for confirmation and the cooldown),
a heat episode above 85 degC (legality pre-emption of INT4), queue bursts
(OFFLOAD_CPU forbidden when the queue is full), a few dropped or broken
readings (NaN, empty: envelope fallback) and a burst of slow inferences
that breaches the SLA and recovers.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np

CYCLES = 2000
COLUMNS = ("compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth", "latency_ms")


def rows(seed: int = 20261201) -> list[list[str]]:
    """The trace's cells, as text (fixed decimals, so the file is the same on every machine)."""
    rng = np.random.default_rng(seed)
    table = []
    for k in range(CYCLES):
        phase = 2 * math.pi * k / 400
        compute = 55 + 40 * math.sin(phase) + rng.normal(0, 4)
        memory = 50 + 40 * math.sin(phase / 2 + 1.0) + rng.normal(0, 4)
        misses = 40 + 35 * math.cos(phase / 3) + rng.normal(0, 3)
        temperature = 60 + 20 * math.sin(phase / 5) + (30 if 900 <= k < 1100 else 0) + rng.normal(0, 1)
        queue = 20 + 15 * math.sin(phase * 3) + (35 if 1400 <= k < 1450 else 0) + rng.normal(0, 2)
        latency = 4 + abs(rng.normal(0, 1)) + (40 if 1600 <= k < 1640 else 0)
        values = [min(max(v, 0.0), 100.0) for v in (compute, memory, misses)]
        values += [min(max(temperature, 20.0), 110.0), min(max(queue, 0.0), 64.0)]
        cells = [f"{v:.3f}" for v in values] + [f"{latency:.3f}"]
        if k % 331 == 17:
            cells[3] = "nan"
        if k % 509 == 41:
            cells[0] = ""
        table.append(cells)
    return table


def main() -> None:
    path = pathlib.Path(__file__).with_name("coadapt.trace.csv")
    text = ",".join(COLUMNS) + "\n" + "".join(",".join(cells) + "\n" for cells in rows())
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path} ({CYCLES} cycles)")


if __name__ == "__main__":
    main()
