"""certfsm: certified lookup-table state machines from neural controllers.

The core, light enough for an embedded target: the controller spec
(`load_spec`), the network IR (`Network`, `AffineLayer`; `load_onnx`
imports onnx only when called), the decision rule and confidence gate,
the artifact format, and the error hierarchy. The heavy parts live in
the sub-packages: `certfsm.verify` (Marabou, Z3, bounds, reports),
`certfsm.fsm` (grid, table, state machine and its proofs).
"""

from ._decision import decide, decision_margin, gated_decide, margin_from_probability
from ._errors import ArtifactError, CertfsmError, EngineError, ModelError, ReportError, SpecError, VnnlibError
from ._network import AffineLayer, Network


def load_onnx(path):
    """Load an ONNX model into the network IR (imports onnx on first use)."""
    from ._onnx import load_onnx as _load_onnx

    return _load_onnx(path)


def load_spec(path):
    """Load and validate a controller spec (imports jsonschema on first use)."""
    from ._spec import load_spec as _load_spec

    return _load_spec(path)


__all__ = [
    "AffineLayer", "ArtifactError", "CertfsmError", "EngineError", "ModelError", "Network", "ReportError",
    "SpecError", "VnnlibError", "decide", "decision_margin", "gated_decide", "load_onnx", "load_spec",
    "margin_from_probability",
]
