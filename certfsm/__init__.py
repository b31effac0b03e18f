"""certfsm: certified lookup-table state machines from neural controllers.

The core, light enough for an embedded target. Every concept below has
one home, an underscore module of this package; everything outside the
core (the sub-packages, the benchmarks, users) imports it from `certfsm`
by the public name given here, never from the underscore module:

- errors: `CertfsmError` and its subclasses (`_errors`, standard library
  only, imported at once);
- the one verdict record: `VerdictRecord` (every proof's property,
  engine, verdict, time and SMT-LIB file) and the verdicts `PROVED`,
  `VIOLATED`, `UNKNOWN`, `VERDICTS` (`_verdict`, standard library only,
  imported at once);
- the controller spec: `load_spec`, `spec_from_dict` (`_spec_reading`), `describe_spec` (its summary lines; `_spec`,
  `_spec_rules`, `_spec_schema`; import jsonschema when called),
  `SlaPath` (one SLA path of a spec) and `SLA_STATISTICS` (what a path may
  compare with its limit; the spec schema and `certfsm.sla` follow it, `_sla_path`); `starting_spec`
  (a spec document to fill in, from an ONNX model, `_spec_init`); what a grid costs: `TableSize` (its
  table as the hardware ROMs lay it out), `MAX_CELLS` and `check_grid_size` (`_table_size`);
- the network IR: `Network`, `AffineLayer` (`_network`); `load_onnx` and
  `run_onnxruntime` (`_onnx`, `_onnx_graph`, `_onnx_fold`; import onnx and
  onnxruntime when called);
- the decision rule and confidence gate: `decide`, `preference`,
  `gated_decide` (`_decision`);
- the artifact: `Artifact`, `load_artifact`, the one writer of its
  payload `artifact_payload` (`_artifact_payload`) / `write_artifact`, `allowed_bitmasks`,
  `ARTIFACT_SUFFIX`, `sign_artifact` (`_artifact`, with the loader's own reading of the payload,
  trust rules, signature and canonical form in `_artifact_reading`, `_artifact_spec`,
  `_artifact_table`, `_artifact_checks`, `_artifact_trust`, `_artifact_signature`,
  `_canonical`); `StoredSpec`, the spec an artifact stores as the loader read it
  (`Artifact.stored_spec`, `_stored_spec`); the one rule for a certified
  certificate `is_certified` and the names of its properties, by which
  the proofs in `certfsm.fsm` are named: `CELLS_EXACT`, `TABLE_PROPERTIES`,
  `INVARIANT_QUERIES`, `MACHINE_PROPERTIES` (`_artifact_trust`);
  `PublicKey`, `generate_key_pair`, `load_private_key` (`_signing`);
  `inspect_artifact` (what an artifact holds and whether it may run,
  `_inspect`);
- the certified machine: the public module `certfsm.machine` (binning,
  table, parameters and the step function, standard library only);
- building blocks the sub-packages share: `frozen_array` (read-only
  numpy arrays, `_arrays`); `rational_array`, `integer_form`,
  `decimal_value` (the exact decimal a spec constant denotes),
  `float_at_least`, `float_at_most` (floats rounded in a chosen
  direction, `_decimal`, standard library only); exact rationals
  (`_rational`); `write_atomically` and
  `staged_folder` (a file or a report folder appears whole or not at
  all, `_staging`); `json_path` (`_jsonpath`); `ReadOnlyDict`
  (`_readonly`); `token_colours` (one colour per token in every picture,
  `_palette`); `certfsm_version` (the one version string every file and
  `--version` state, `_version`);
- the command line: the package `certfsm.cli` (folder `cli/`), the top
  floor, which imports every other package by its public names.

Only the errors and the verdict record load with the package: every other
name loads its module on first use (PEP 562), so that `import
certfsm.machine` and `import certfsm.runtime` need the standard library
alone, and `load_spec`, `spec_from_dict`, `load_onnx`, `run_onnxruntime`
and `load_artifact` are functions that import jsonschema, onnx,
onnxruntime or numpy only when called. The heavy parts live in
the sub-packages: `certfsm.verify` (Marabou, Z3, bounds, reports),
`certfsm.fsm` (grid, table, state machine and its proofs),
`certfsm.runtime` and `certfsm.sla` (running a certified artifact),
`certfsm.hdl_export` (Verilog and C).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import (
    ArtifactError,
    AuditLogError,
    BoxTreeError,
    CertfsmError,
    EngineError,
    ModelError,
    ProbeError,
    ReportError,
    SigningError,
    SpecError,
    UsageError,
    VnnlibError,
)
from ._verdict import PROVED, UNKNOWN, VERDICTS, VIOLATED, VerdictRecord

if TYPE_CHECKING:  # the lazy functions' types, named without importing their modules at run time
    import os
    from types import ModuleType
    from typing import Any, Iterable

    import numpy as np

    from ._signing import KeySource
    from ._spec import ControllerSpec

if TYPE_CHECKING:  # the lazy names as the type checker sees them: the same names from the same modules as _LAZY
    from ._arrays import frozen_array
    from ._artifact import ARTIFACT_SUFFIX, Artifact, sign_artifact, write_artifact
    from ._artifact_payload import allowed_bitmasks, artifact_payload
    from ._artifact_trust import CELLS_EXACT, INVARIANT_QUERIES, MACHINE_PROPERTIES, TABLE_PROPERTIES, is_certified
    from ._box_tree import (
        Box,
        BoxTree,
        Evidence,
        Interval,
        MAX_TREE_DEPTH,
        MAX_TREE_LEAVES,
        Leaf,
        LeafStatus,
        Refinement,
        Split,
        TreeBudget,
        decode_tree,
        encode_tree,
        leaf_allowed_mask,
        threshold_problem,
    )
    from ._decimal import decimal_value, float_at_least, float_at_most
    from ._decision import decide, gated_decide, preference
    from ._inspect import inspect_artifact
    from ._jsonpath import json_path
    from ._network import AffineLayer, Network
    from ._palette import token_colours
    from ._rational import integer_form, rational_array
    from ._readonly import ReadOnlyDict
    from ._signing import PublicKey, generate_key_pair, load_private_key
    from ._sla_path import SLA_STATISTICS, SlaPath
    from ._spec import describe_spec
    from ._spec_init import starting_spec
    from ._staging import staged_folder, write_atomically
    from ._stored_spec import StoredSpec
    from ._table_size import MAX_CELLS, TableSize, check_grid_size
    from ._version import certfsm_version

_LAZY = {
    "AffineLayer": "_network",
    "Box": "_box_tree",
    "BoxTree": "_box_tree",
    "Evidence": "_box_tree",
    "Interval": "_box_tree",
    "Leaf": "_box_tree",
    "LeafStatus": "_box_tree",
    "Refinement": "_box_tree",
    "Split": "_box_tree",
    "TreeBudget": "_box_tree",
    "decode_tree": "_box_tree",
    "encode_tree": "_box_tree",
    "leaf_allowed_mask": "_box_tree",
    "threshold_problem": "_box_tree",
    "MAX_TREE_DEPTH": "_box_tree",
    "MAX_TREE_LEAVES": "_box_tree",
    "Network": "_network",
    "decide": "_decision",
    "gated_decide": "_decision",
    "preference": "_decision",
    "SlaPath": "_sla_path",
    "SLA_STATISTICS": "_sla_path",
    "ARTIFACT_SUFFIX": "_artifact",
    "Artifact": "_artifact",
    "allowed_bitmasks": "_artifact_payload",
    "artifact_payload": "_artifact_payload",
    "StoredSpec": "_stored_spec",
    "write_artifact": "_artifact",
    "is_certified": "_artifact_trust",
    "PublicKey": "_signing",
    "CELLS_EXACT": "_artifact_trust",
    "TABLE_PROPERTIES": "_artifact_trust",
    "INVARIANT_QUERIES": "_artifact_trust",
    "MACHINE_PROPERTIES": "_artifact_trust",
    "frozen_array": "_arrays",
    "float_at_least": "_decimal",
    "float_at_most": "_decimal",
    "decimal_value": "_decimal",
    "integer_form": "_rational",
    "rational_array": "_rational",
    "staged_folder": "_staging",
    "write_atomically": "_staging",
    "json_path": "_jsonpath",
    "ReadOnlyDict": "_readonly",
    "token_colours": "_palette",
    "certfsm_version": "_version",
    "describe_spec": "_spec",
    "MAX_CELLS": "_table_size",
    "TableSize": "_table_size",
    "check_grid_size": "_table_size",
    "starting_spec": "_spec_init",
    "sign_artifact": "_artifact",
    "inspect_artifact": "_inspect",
    "generate_key_pair": "_signing",
    "load_private_key": "_signing",
}
"""Public name -> the core module that is its home, loaded on first use (and imported for the type checker above)."""


def _core(module: str) -> ModuleType:
    """The core module `module`, imported on use.

    The certfsm-runtime install (packaging/runtime) holds only the modules the runtime needs; asking it for
    one of the toolkit's is one ImportError that names the full install, not a bare ModuleNotFoundError.
    """
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as error:
        if error.name is not None and error.name.startswith(f"{__name__}."):
            raise ImportError(
                f"{error.name} belongs to the certfsm toolkit, which this install (certfsm-runtime) "
                "leaves out; pip install certfsm for it",
                name=error.name,
            ) from None
        raise


def __getattr__(name: str) -> Any:  # a lazy name's value: any of the types in _LAZY's modules
    if name in _LAZY:
        value = getattr(_core(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_onnx(path: str | os.PathLike[str]) -> Network:
    """Load an ONNX model into the network IR (imports onnx on first use)."""
    network: Network = _core("_onnx").load_onnx(path)
    return network


def run_onnxruntime(network: Network, x: np.ndarray) -> np.ndarray:
    """Scores of the ONNX model behind `network` for one input or a batch, in onnxruntime (imported on first use)."""
    scores: np.ndarray = _core("_onnx").run_onnxruntime(network, x)
    return scores


def load_artifact(
    path: str | os.PathLike[str],
    *,
    require_proved: bool = True,
    trusted_keys: KeySource | Iterable[KeySource] | None = None,
) -> Artifact:
    """Read and check a .cfsm artifact (standard library and numpy; see `certfsm._artifact.load_artifact`)."""
    artifact: Artifact = _core("_artifact").load_artifact(
        path, require_proved=require_proved, trusted_keys=trusted_keys
    )
    return artifact


def spec_from_dict(data: Any, path: str | os.PathLike[str], *, require_model: bool = True) -> ControllerSpec:
    """Validate an already parsed spec document as if read from `path` (imports jsonschema on first use)."""
    spec: ControllerSpec = _core("_spec_reading").spec_from_dict(data, path, require_model=require_model)
    return spec


def load_spec(path: str | os.PathLike[str]) -> ControllerSpec:
    """Load and validate a controller spec (imports jsonschema on first use)."""
    spec: ControllerSpec = _core("_spec_reading").load_spec(path)
    return spec


__all__ = [
    "ARTIFACT_SUFFIX",
    "AffineLayer",
    "Artifact",
    "ArtifactError",
    "AuditLogError",
    "Box",
    "BoxTree",
    "BoxTreeError",
    "Evidence",
    "Interval",
    "Leaf",
    "LeafStatus",
    "Refinement",
    "Split",
    "TreeBudget",
    "decode_tree",
    "encode_tree",
    "leaf_allowed_mask",
    "MAX_TREE_DEPTH",
    "MAX_TREE_LEAVES",
    "threshold_problem",
    "CELLS_EXACT",
    "CertfsmError",
    "EngineError",
    "INVARIANT_QUERIES",
    "MACHINE_PROPERTIES",
    "MAX_CELLS",
    "ModelError",
    "Network",
    "PROVED",
    "ProbeError",
    "PublicKey",
    "ReadOnlyDict",
    "ReportError",
    "SLA_STATISTICS",
    "SigningError",
    "SlaPath",
    "SpecError",
    "StoredSpec",
    "TABLE_PROPERTIES",
    "TableSize",
    "UNKNOWN",
    "UsageError",
    "VERDICTS",
    "VIOLATED",
    "VerdictRecord",
    "VnnlibError",
    "allowed_bitmasks",
    "artifact_payload",
    "certfsm_version",
    "check_grid_size",
    "decide",
    "decimal_value",
    "describe_spec",
    "float_at_least",
    "float_at_most",
    "frozen_array",
    "gated_decide",
    "generate_key_pair",
    "inspect_artifact",
    "integer_form",
    "is_certified",
    "json_path",
    "load_artifact",
    "load_onnx",
    "load_private_key",
    "load_spec",
    "preference",
    "rational_array",
    "run_onnxruntime",
    "sign_artifact",
    "spec_from_dict",
    "staged_folder",
    "starting_spec",
    "token_colours",
    "write_artifact",
    "write_atomically",
]
