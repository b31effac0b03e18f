"""certfsm: certified lookup-table state machines from neural controllers.

The core, light enough for an embedded target: the controller spec
(`load_spec`), the network IR (`Network`, `AffineLayer`; `load_onnx`
imports onnx only when called), the decision rule and confidence gate,
the artifact format, the certified machine (`certfsm.machine`: binning,
table, parameters and the step function, standard library only) and the
error hierarchy; the one verdict record (`VerdictRecord`, every proof's
verdict, engine, time and SMT-LIB file) and the one rule for a certified
certificate (`is_certified`); the one writer of an artifact's payload
(`artifact_payload`, `write_artifact`, next to its loader). The heavy parts live in
the sub-packages: `certfsm.verify` (Marabou, Z3, bounds, reports),
`certfsm.fsm` (grid, table, state machine and its proofs).
"""

from ._errors import ArtifactError, CertfsmError, EngineError, ModelError, ReportError, SigningError, SpecError, VnnlibError
from ._verdict import PROVED, UNKNOWN, VERDICTS, VIOLATED, VerdictRecord

# The numeric parts load on first use (PEP 562), so that `import certfsm.machine`
# (the runtime's scalar path) needs the standard library alone.
_LAZY = {"decide": "_decision", "decision_margin": "_decision", "gated_decide": "_decision",
         "margin_from_probability": "_decision", "AffineLayer": "_network", "Network": "_network",
         "allowed_bitmasks": "_artifact", "artifact_payload": "_artifact", "write_artifact": "_artifact",
         "is_certified": "_artifact_trust"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_onnx(path):
    """Load an ONNX model into the network IR (imports onnx on first use)."""
    from ._onnx import load_onnx as _load_onnx

    return _load_onnx(path)


def load_artifact(path, *, require_proved=True, trusted_keys=None):
    """Read and check a .cfsm artifact (standard library and numpy; see `certfsm._artifact.load_artifact`)."""
    from ._artifact import load_artifact as _load_artifact

    return _load_artifact(path, require_proved=require_proved, trusted_keys=trusted_keys)


def spec_from_dict(data, path, *, require_model=True):
    """Validate an already parsed spec document as if read from `path` (imports jsonschema on first use)."""
    from ._spec import spec_from_dict as _spec_from_dict

    return _spec_from_dict(data, path, require_model=require_model)


def load_spec(path):
    """Load and validate a controller spec (imports jsonschema on first use)."""
    from ._spec import load_spec as _load_spec

    return _load_spec(path)


__all__ = [
    "AffineLayer", "ArtifactError", "CertfsmError", "EngineError", "ModelError", "Network", "ReportError",
    "SigningError", "SpecError", "VnnlibError", "decide", "decision_margin", "gated_decide", "load_onnx", "load_spec",
    "margin_from_probability",
    "PROVED", "UNKNOWN", "VERDICTS", "VIOLATED", "VerdictRecord", "allowed_bitmasks", "artifact_payload",
    "is_certified", "write_artifact", "load_artifact", "spec_from_dict",
]
