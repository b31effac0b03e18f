"""certfsm.runtime: run a certified controller.

- `load(path, trusted_keys=..., sla=..., record=...) -> Controller`: the
  artifact through the core loader (hash, canonical form, structure,
  every required certificate entry proved and, with trusted keys, a
  trusted key's Ed25519 signature over the payload); anything else is
  refused with the loader's one-line message. `load_machine(path)` gives
  the certified `certfsm.machine.Machine` alone, for `Controller.swap`.
- `Controller`: `step(reading, metrics=..., now=...) -> Decision` one cycle
  (`step_fixed` for fixed-point integers), `decide_many(readings)` a batch
  of table decisions, `override(token, cycles)`, `swap(machine)` between
  two cycles. `RuntimeInputWarning` says once per controller that a
  reading leaves out an input or the metrics leave out an SLA metric (the
  cycles fall back by design; `warnings` filters it or makes it an error).
- the audit log: `open_audit(controller, path)` starts an `AuditWriter`
  that appends every step, swap and override request to a SHA-256-chained
  binary log; `verify_log`, `read_log`, `export_jsonl` (JSON Lines, names
  beside numbers); `replay_log` re-executes a log and shows every decision
  reproduced; `write_audit_report` draws a log for people (matplotlib
  imported only then).
- `run_artifact(artifact, probe, ...)`: `certfsm run` as one call (load,
  probe, audit log, metrics, SIGINT/SIGTERM stop, SIGHUP reload, all
  closed on every path).
- observability: `RuntimeCounters` (`RuntimeCounters.for_machine(machine)`,
  attached with `Controller.attach_counters`) counts decisions per token
  and reason, SLA breaches and recoveries, swaps, override requests and
  step latency; `serve_metrics(counters, port)` exports them for
  Prometheus (the optional prometheus-client, imported only then).

Homes (the underscore modules; outside this package only the names
above are used): the controller, its `Decision` and `load`'s SLA monitor
in `_controller`, the one-time warnings in `_input_warnings`; the audit
log's bytes in `_audit_format`, its writer in `_audit`, its reader,
verifier and records as JSON in `_audit_read`, the export with names in
`_log_export`, replay in `_replay`, the report in
`_report`; the run loop in `_run`; probes in `_probes`, `_probes_linux`,
`_probes_trace`, with `_calibration` and the reading blob `_blob`;
counters in `_observe`, their Prometheus export in `_metrics_export`. The
artifact loader and the machine are the core's (`certfsm.load_artifact`,
`certfsm.machine`).

Importing this package pulls in neither certfsm.verify, the distillation
and proof modules of certfsm.fsm, onnx, onnxruntime, maraboupy, z3 nor
matplotlib: the decisions are `certfsm.machine.Machine.step`, standard
library only.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from certfsm.machine import Machine

from ._audit import AuditWriter
from ._audit_read import read_log, verify_log
from ._controller import Controller, spec_sla_monitor
from ._input_warnings import RuntimeInputWarning
from ._log_export import export_jsonl
from ._observe import RuntimeCounters
from ._replay import replay_log
from ._report import write_audit_report
from ._run import run_artifact

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from ._controller import Recorder, SlaSource
    from ._run import TrustedKeys


def load(
    path: str | os.PathLike[str],
    *,
    trusted_keys: TrustedKeys | None = None,
    sla: SlaSource | bool = True,
    record: Recorder | None = None,
) -> Controller:
    """A controller for the certified artifact at `path`; ArtifactError (one line) for anything the loader refuses.

    `trusted_keys`: public key files (KEY.pub of certfsm keygen) or
    `certfsm.PublicKey` values; when given, an artifact loads only
    when one of them signed it and the signature verifies (needs the
    ``sign`` extra). None (the default) checks no signature and imports no
    cryptography.

    `sla`: True monitors the SLA paths of the artifact's own spec
    (`certfsm.sla`; none when the spec has none), False monitors nothing,
    or give a monitor. `record` receives every decision (the audit log).
    """
    from certfsm import load_artifact

    artifact = load_artifact(path, trusted_keys=trusted_keys)
    monitor = spec_sla_monitor(artifact.stored_spec) if sla is True else sla or None
    return Controller(Machine.from_artifact(artifact), sla=monitor, record=record)


def load_machine(path: str | os.PathLike[str], *, trusted_keys: TrustedKeys | None = None) -> Machine:
    """The machine of the certified artifact at `path`, through the core loader (which refuses uncertified files).

    `trusted_keys` as for `load`: when given, only a trusted key's valid signature lets the artifact load.
    """
    from certfsm import load_artifact

    return Machine.from_artifact(load_artifact(path, trusted_keys=trusted_keys))


def open_audit(controller: Controller, path: str | os.PathLike[str], **options: Any) -> AuditWriter:
    """Start an audit log at `path` for `controller` (its artifact, inputs and SLA metrics) and attach it."""
    writer = AuditWriter(
        path, controller.machine.artifact_sha256, controller.machine.names, controller.metric_names, **options
    )
    controller.attach_audit(writer)
    return writer


def serve_metrics(counters: RuntimeCounters, port: int) -> WSGIServer:
    """Serve `counters` for Prometheus at http://127.0.0.1:`port`/metrics (needs the metrics extra); returns the server."""
    from ._metrics_export import serve_metrics as serve

    return serve(counters, port)


__all__ = [
    "write_audit_report",
    "AuditWriter",
    "RuntimeCounters",
    "RuntimeInputWarning",
    "serve_metrics",
    "run_artifact",
    "Controller",
    "export_jsonl",
    "load",
    "load_machine",
    "open_audit",
    "read_log",
    "replay_log",
    "verify_log",
]
