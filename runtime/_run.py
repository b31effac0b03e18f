"""`certfsm run`: a certified controller against live probes or a recorded trace, cycle by cycle.

One loop for both sources: sample the probe, calibrate into the spec's
input order, step the controller (metrics go to the SLA monitor), hand
the decision to the recorder. A trace is replayed as fast as it can be
(`period_ms` 0) unless a period is given; the Linux probe is sampled
every `period_ms`. The loop stops after `steps` cycles, at the end of a
trace, or when `should_stop()` says so (the CLI's SIGINT/SIGTERM), and
between two cycles it reloads the artifact when `should_reload()` says so
(SIGHUP: a hot swap, refused and reported when the new file does not
load, so a bad file on disk never stops a running controller).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from certfsm import CertfsmError, UsageError

from ._calibration import Calibration
from ._controller import Controller


@dataclass
class RunSummary:
    """What a run did: cycles, tokens and reasons counted, swaps (old, new hashes) and refused reloads."""

    steps: int = 0
    tokens: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    swaps: list = field(default_factory=list)
    refused_reloads: list = field(default_factory=list)


def open_probe(text: str, input_names):
    """The probe a ``--probe`` value names: ``linux``, ``trace:FILE.csv``, or ``example-trace`` (the shipped one)."""
    if text == "linux":
        from ._probes_linux import LinuxProbe

        return LinuxProbe()
    if text == "example-trace":
        from certfsm.examples import example_trace_path
        from ._probes_trace import TraceProbe

        return TraceProbe(example_trace_path(), input_names)
    if text.startswith("trace:") and len(text) > len("trace:"):
        from ._probes_trace import TraceProbe

        return TraceProbe(text[len("trace:"):], input_names)
    raise UsageError(f"--probe {text} is not a probe; give --probe linux, --probe trace:FILE.csv or --probe example-trace")


def run(controller: Controller, probe, *, steps: int | None = None, period_ms: float = 0.0,
        calibration: Calibration | None = None, should_stop: Callable[[], bool] = lambda: False,
        should_reload: Callable[[], bool] = lambda: False, reload: Callable[[], object] | None = None,
        on_swap: Callable | None = None, clock: Callable[[], float] = time.monotonic, counters=None) -> RunSummary:
    """Step `controller` on `probe`'s samples; see the module docstring for when it stops and reloads.

    `counters` (a `RuntimeCounters`, attached to the controller by the
    caller so it counts the decisions) also counts refused reloads.
    """
    calibration = calibration or Calibration.identity(controller.machine.names)
    summary = RunSummary()
    next_time = clock()
    while steps is None or summary.steps < steps:
        if should_stop():
            break
        if should_reload() and reload is not None:
            try:
                old, new = controller.swap(reload())
            except CertfsmError as error:
                summary.refused_reloads.append(str(error))
                if counters is not None:
                    counters.count_refused_reload()
            else:
                summary.swaps.append((old, new))
                if on_swap is not None:
                    on_swap(old, new)
        now = clock()
        try:
            sample = probe.sample(now)
        except EOFError:
            break
        decision = controller.step(calibration.reading(sample), metrics=dict(sample.metrics), now=now)
        summary.steps += 1
        summary.tokens[decision.token] += 1
        summary.reasons[decision.reason.name] += 1
        if period_ms > 0:
            next_time += period_ms / 1000.0
            time.sleep(max(0.0, next_time - clock()))
    return summary
