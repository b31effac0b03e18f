"""`certfsm run`: a certified controller against live probes or a recorded trace, cycle by cycle.

One loop for both sources: sample the probe, calibrate into the spec's
input order, step the controller (metrics go to the SLA monitor), hand
the decision to the recorder. A trace is replayed as fast as it can be
(`period_ms` 0) unless a period is given; the Linux probe is sampled
every `period_ms`. The loop stops after `steps` cycles, at the end of a
trace, or when `should_stop()` says so (the CLI's SIGINT/SIGTERM), and
between two cycles it reloads the artifact when `should_reload()` says so
(SIGHUP: a hot swap, possibly to another grid of the same layout).

A reload is refused when the new file does not load (not certified, not
signed by a trusted key, damaged, missing, unreadable: whatever the
loader raises) or its machine cannot replace the running one (other
inputs, frac_bits or tokens: `Controller.swap`). A refusal is reported in
one line naming the file and why (`on_refused`, stderr by default),
appended to the audit log, counted (`RuntimeCounters.refused_reloads`)
and listed in the summary; the machine in force goes on, so a bad file
on disk never stops a running controller.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from certfsm import ArtifactError, CertfsmError, UsageError
from certfsm.machine import Machine

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


def open_probe(probe: str, input_names):
    """The probe `probe` names: ``linux``, ``trace:FILE.csv``, or ``example-trace`` (the shipped one)."""
    if probe == "linux":
        from ._probes_linux import LinuxProbe

        return LinuxProbe()
    if probe == "example-trace":
        from certfsm.examples import example_trace_path
        from ._probes_trace import TraceProbe

        return TraceProbe(example_trace_path(), input_names)
    if probe.startswith("trace:") and len(probe) > len("trace:"):
        from ._probes_trace import TraceProbe

        return TraceProbe(probe[len("trace:"):], input_names)
    raise UsageError(f"probe={probe!r} is not a probe; give probe='linux', probe='trace:FILE.csv' or "
                     "probe='example-trace'")


def print_refusal(message: str) -> None:
    """`run`'s default `on_refused`: the refusal as one line on stderr, at once."""
    print(f"certfsm run: reload refused, the machine in force goes on: {message}", file=sys.stderr, flush=True)


def run(controller: Controller, probe, *, steps: int | None = None, period_ms: float = 0.0,
        calibration: Calibration | None = None, should_stop: Callable[[], bool] = lambda: False,
        should_reload: Callable[[], bool] = lambda: False, reload: Callable[[], object] | None = None,
        on_swap: Callable | None = None, clock: Callable[[], float] = time.monotonic, counters=None,
        reload_source: str | None = None, on_refused: Callable[[str], None] | None = print_refusal) -> RunSummary:
    """Step `controller` on `probe`'s samples; see the module docstring for when it stops and reloads.

    `reload()` returns the new `Machine`; `reload_source` names the file it
    reads, for the refusal messages (the loader's own messages name it
    anyway). `on_refused(message)` hears of each refusal as it happens
    (None: only the summary keeps them). `counters` (a `RuntimeCounters`,
    attached to the controller by the caller so it counts the decisions)
    also counts refused reloads; counters attached to the controller
    count them there, once.
    """
    calibration = calibration or Calibration.identity(controller.machine.names)
    summary = RunSummary()
    next_time = clock()
    while steps is None or summary.steps < steps:
        if should_stop():
            break
        if should_reload() and reload is not None:
            swapped = _reload(controller, reload, reload_source)
            if isinstance(swapped, str):
                summary.refused_reloads.append(swapped)
                if counters is not None and counters is not controller.counters:
                    counters.count_refused_reload()
                if on_refused is not None:
                    on_refused(swapped)
            else:
                summary.swaps.append(swapped)
                if on_swap is not None:
                    on_swap(*swapped)
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


def _reload(controller: Controller, reload: Callable[[], object], source: str | None) -> tuple[str, str] | str:
    """One reload: (old, new) hashes after a swap, or the refusal's message (already counted and logged).

    Anything `reload` raises is a refusal: the loader's errors are
    CertfsmErrors naming the file, and whatever else a broken file or
    loader raises must not stop the loop either.
    """
    try:
        machine = reload()
        if not isinstance(machine, Machine):
            raise TypeError(f"the reload gave {type(machine).__name__}, not a Machine; reload with "
                            "certfsm.runtime.load_machine")
    except Exception as error:  # noqa: BLE001 - see the docstring
        message = str(error) if isinstance(error, CertfsmError) else f"{type(error).__name__}: {error}"
        if source is not None and not message.startswith(source):
            message = f"{source}: {message}"
        elif source is None and not isinstance(error, CertfsmError):
            message = f"the reloaded artifact: {message}"
        controller.refuse_swap(message)
        return message
    try:
        return controller.swap(machine, source=source)
    except ArtifactError as error:  # another layout: Controller.swap counted and logged its refusal
        return str(error)
