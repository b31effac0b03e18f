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

import math
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, TypeAlias

from certfsm import ArtifactError, CertfsmError, UsageError
from certfsm.machine import Machine

from ._calibration import Calibration
from ._controller import Controller
from ._probes import HardwareProbe

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from certfsm import PublicKey

    from ._audit import AuditWriter
    from ._observe import RuntimeCounters

    KeySource: TypeAlias = str | os.PathLike[str] | PublicKey
    TrustedKeys: TypeAlias = KeySource | Iterable[KeySource]
    """Public key files (KEY.pub of certfsm keygen) or `certfsm.PublicKey` values, one or several."""


@dataclass
class RunSummary:
    """What a run did: cycles, tokens and reasons counted, swaps (old, new hashes) and refused reloads."""

    steps: int = 0
    tokens: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    swaps: list[tuple[str, str]] = field(default_factory=list)
    refused_reloads: list[str] = field(default_factory=list)


def open_probe(probe: str, input_names: Iterable[str]) -> HardwareProbe:
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

        return TraceProbe(probe[len("trace:") :], input_names)
    raise UsageError(
        f"probe={probe!r} is not a probe; give probe='linux', probe='trace:FILE.csv' or probe='example-trace'"
    )


def print_refusal(message: str) -> None:
    """`run`'s default `on_refused`: the refusal as one line on stderr, at once."""
    print(f"certfsm run: reload refused, the machine in force goes on: {message}", file=sys.stderr, flush=True)


def run(
    controller: Controller,
    probe: HardwareProbe,
    *,
    steps: int | None = None,
    period_ms: float = 0.0,
    calibration: Calibration | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    should_reload: Callable[[], bool] = lambda: False,
    reload: Callable[[], object] | None = None,
    on_swap: Callable[[str, str], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
    counters: RuntimeCounters | None = None,
    reload_source: str | None = None,
    on_refused: Callable[[str], None] | None = print_refusal,
) -> RunSummary:
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


@dataclass(frozen=True)
class ArtifactRun:
    """What `run_artifact` did: the loop's summary, and the audit log's record count and head (None without one)."""

    summary: RunSummary
    audit_records: int | None = None
    audit_head: str | None = None


def run_artifact(
    artifact: str | os.PathLike[str],
    probe: str,
    *,
    steps: int | None = None,
    period_ms: float = 0.0,
    calibration: str | os.PathLike[str] | None = None,
    audit: str | os.PathLike[str] | None = None,
    fsync_every: int = 1000,
    metrics_port: int | None = None,
    trusted_keys: TrustedKeys | None = None,
) -> ArtifactRun:
    """`certfsm run` as one call: load `artifact`, open `probe`, the audit log and the metrics server, run, close.

    The run stops after `steps` cycles, at the end of a trace or on
    SIGINT/SIGTERM; SIGHUP reloads the artifact from its file (a refused
    reload leaves the machine in force running, see the module
    docstring). Signals are handled only when called from the main
    thread (Python delivers them there alone); the previous handlers are
    restored, and the probe, the audit log and the metrics server closed,
    on every path. `calibration` is a JSON file (`Calibration.load`);
    `fsync_every` 0 syncs the log only on close.
    """
    from . import RuntimeCounters, load, load_machine, open_audit, serve_metrics

    if steps is not None and steps < 1:
        raise UsageError(f"steps={steps} is not a positive number of cycles; give e.g. steps=1000")
    if not (math.isfinite(period_ms) and period_ms >= 0):
        raise UsageError(f"period_ms={period_ms:g} is not a number of milliseconds >= 0; give e.g. period_ms=10")
    if fsync_every < 0:
        raise UsageError(f"fsync_every={fsync_every} is negative; give 1 (every record), N, or 0 (on close)")
    controller = load(artifact, trusted_keys=trusted_keys)
    names = controller.machine.names
    calibrated = Calibration.load(calibration, names) if calibration is not None else Calibration.identity(names)
    counters: RuntimeCounters | None = None
    server: WSGIServer | None = None
    writer: AuditWriter | None = None
    flags = {"stop": False, "reload": False}

    def take_reload() -> bool:
        requested, flags["reload"] = flags["reload"], False
        return requested

    handlers = {
        signal.SIGINT: lambda *_: flags.update(stop=True),
        signal.SIGTERM: lambda *_: flags.update(stop=True),
        signal.SIGHUP: lambda *_: flags.update(reload=True),
    }
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()} if in_main_thread else {}
    try:
        if metrics_port is not None:
            counters = RuntimeCounters.for_machine(controller.machine)
            controller.attach_counters(counters)
            server = serve_metrics(counters, metrics_port)
        writer = open_audit(controller, audit, fsync_every=fsync_every) if audit is not None else None
        with open_probe(probe, names) as source:
            summary = run(
                controller,
                source,
                steps=steps,
                period_ms=period_ms,
                calibration=calibrated,
                should_stop=lambda: flags["stop"],
                should_reload=take_reload,
                reload=lambda: load_machine(artifact, trusted_keys=trusted_keys),
                reload_source=str(artifact),
                counters=counters,
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.shutdown()
        if writer is not None:
            writer.close()
    if writer is None:
        return ArtifactRun(summary)
    return ArtifactRun(summary, writer.records, writer.head)


def _reload(controller: Controller, reload: Callable[[], object], source: str | None) -> tuple[str, str] | str:
    """One reload: (old, new) hashes after a swap, or the refusal's message (already counted and logged).

    Anything `reload` raises is a refusal: the loader's errors are
    CertfsmErrors naming the file, and whatever else a broken file or
    loader raises must not stop the loop either.
    """
    try:
        machine = reload()
        if not isinstance(machine, Machine):
            raise TypeError(
                f"the reload gave {type(machine).__name__}, not a Machine; reload with certfsm.runtime.load_machine"
            )
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
