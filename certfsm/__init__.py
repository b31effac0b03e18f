"""certfsm: certified lookup-table state machines from neural controllers.

The core, light enough for an embedded target: the controller spec
(`load_spec`), the network IR (`Network`, `AffineLayer`; `load_onnx`
imports onnx only when called), the decision rule and confidence gate,
the artifact format, the certified machine (`certfsm.machine`: binning,
table, parameters and the step function, standard library only) and the
error hierarchy. The heavy parts live in
the sub-packages: `certfsm.verify` (Marabou, Z3, bounds, reports),
`certfsm.fsm` (grid, table, state machine and its proofs).
"""

from ._errors import ArtifactError, CertfsmError, EngineError, ModelError, ReportError, SigningError, SpecError, VnnlibError

# The numeric parts load on first use (PEP 562), so that `import certfsm.machine`
# (the runtime's scalar path) needs the standard library alone.
_LAZY = {"decide": "_decision", "decision_margin": "_decision", "gated_decide": "_decision",
         "margin_from_probability": "_decision", "AffineLayer": "_network", "Network": "_network"}


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


def load_artifact(path, *, require_proved: bool = True, trusted_keys=None):
    """Read and check a certified artifact (.cfsm); ArtifactError names the first failing check (numpy only)."""
    from ._artifact import load_artifact as _load_artifact

    return _load_artifact(path, require_proved=require_proved, trusted_keys=trusted_keys)


def load_spec(path):
    """Load and validate a controller spec (imports jsonschema on first use)."""
    from ._spec import load_spec as _load_spec

    return _load_spec(path)


__all__ = [
    "AffineLayer", "ArtifactError", "CertfsmError", "EngineError", "ModelError", "Network", "ReportError",
    "SigningError", "SpecError", "VnnlibError", "decide", "decision_margin", "gated_decide", "load_artifact",
    "load_onnx", "load_spec", "margin_from_probability",
]
