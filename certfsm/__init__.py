"""certfsm: certified lookup-table state machines from neural controllers.

The core, light enough for an embedded target. Every concept below has
one home, an underscore module of this package; everything outside the
core (the sub-packages, the benchmarks, users) imports it from `certfsm`
by the public name given here, never from the underscore module:

- errors: `CertfsmError` and its subclasses (`_errors`, standard library
  only, imported at once);
- the controller spec: `load_spec` (`_spec`, `_spec_rules`,
  `_spec_schema`; imports jsonschema when called), `SlaPath` (one SLA path
  of a spec, `_sla_path`);
- the network IR: `Network`, `AffineLayer` (`_network`); `load_onnx` and
  `run_onnxruntime` (`_onnx`, `_onnx_graph`, `_onnx_fold`; import onnx and
  onnxruntime when called);
- the decision rule and confidence gate: `decide`, `preference`,
  `decision_margin`, `gated_decide`, `margin_from_probability`
  (`_decision`);
- the artifact: `Artifact`, `load_artifact`, `write_artifact`,
  `ARTIFACT_SUFFIX` (`_artifact`, with its checks, trust rules, signature
  and canonical form in `_artifact_checks`, `_artifact_trust`,
  `_artifact_signature`, `_canonical`), `PublicKey` (`_signing`);
- the certified machine: the public module `certfsm.machine` (binning,
  table, parameters and the step function, standard library only);
- building blocks the sub-packages share: `frozen_array` (read-only
  numpy arrays, `_arrays`); `rational_array`, `integer_form`,
  `float_at_least`, `float_at_most` (exact rationals and floats rounded
  in a chosen direction, `_rational`); `write_atomically` and
  `staged_folder` (a file or a report folder appears whole or not at
  all, `_staging`); `json_path` (`_jsonpath`); `ReadOnlyDict`
  (`_readonly`); `token_colours` (one colour per token in every picture,
  `_palette`);
- the command line: `certfsm.cli` (the one place outside a package that
  may call its underscore modules, and only the core's).

Only the errors load with the package: every other name loads its module
on first use (PEP 562), so that `import certfsm.machine` and
`import certfsm.runtime` need the standard library alone, and
`load_spec`, `load_onnx` and `run_onnxruntime` are functions that import
jsonschema, onnx and onnxruntime only when called. The heavy parts live in
the sub-packages: `certfsm.verify` (Marabou, Z3, bounds, reports),
`certfsm.fsm` (grid, table, state machine and its proofs),
`certfsm.runtime` and `certfsm.sla` (running a certified artifact).
"""

from ._errors import (ArtifactError, AuditLogError, CertfsmError, EngineError, ModelError, ProbeError, ReportError,
                      SigningError, SpecError, UsageError, VnnlibError)

_LAZY = {
    "AffineLayer": "_network", "Network": "_network",
    "decide": "_decision", "decision_margin": "_decision", "gated_decide": "_decision",
    "margin_from_probability": "_decision", "preference": "_decision",
    "SlaPath": "_sla_path",
    "ARTIFACT_SUFFIX": "_artifact", "Artifact": "_artifact", "load_artifact": "_artifact",
    "write_artifact": "_artifact", "PublicKey": "_signing",
    "frozen_array": "_arrays",
    "float_at_least": "_rational", "float_at_most": "_rational", "integer_form": "_rational",
    "rational_array": "_rational",
    "staged_folder": "_staging", "write_atomically": "_staging",
    "json_path": "_jsonpath", "ReadOnlyDict": "_readonly", "token_colours": "_palette",
}
"""Public name -> the core module that is its home, loaded on first use."""


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_onnx(path):
    """Load an ONNX model into the network IR (imports onnx on first use)."""
    from ._onnx import load_onnx as _load_onnx

    return _load_onnx(path)


def run_onnxruntime(network, x):
    """Scores of the ONNX model behind `network` for one input or a batch, in onnxruntime (imported on first use)."""
    from ._onnx import run_onnxruntime as _run_onnxruntime

    return _run_onnxruntime(network, x)


def load_spec(path):
    """Load and validate a controller spec (imports jsonschema on first use)."""
    from ._spec import load_spec as _load_spec

    return _load_spec(path)


__all__ = [
    "ARTIFACT_SUFFIX", "AffineLayer", "Artifact", "ArtifactError", "AuditLogError", "CertfsmError", "EngineError",
    "ModelError", "Network", "ProbeError", "PublicKey", "ReadOnlyDict", "ReportError", "SigningError", "SlaPath",
    "SpecError", "UsageError", "VnnlibError", "decide", "decision_margin", "float_at_least", "float_at_most",
    "frozen_array", "gated_decide", "integer_form", "json_path", "load_artifact", "load_onnx", "load_spec",
    "margin_from_probability", "preference", "rational_array", "run_onnxruntime", "staged_folder", "token_colours",
    "write_artifact", "write_atomically",
]
