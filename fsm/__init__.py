"""certfsm.fsm: the grid, the lookup table, the state machine around it, and the proofs of both.

Each concept has one home (the underscore module in brackets); everything
outside this package uses only the names exported here, and this package
uses only the public names of `certfsm` and `certfsm.verify`.

- `Grid`: cells from the spec's bins (`cell_of`, and `cell_of_fixed` for
  the hardware's integers) (`_grid`).
- `distill`: certified distillation of a network into a `Table` (every
  cell EXACT with a proved token, or CONSERVATIVE with a witness pair or
  a reason), resumable from a checkpoint; `sampled_cross_check` for the
  report (`_distill`; the question asked of a cell in `_cell_problem`,
  its phases in `_cell_sampling`, `_cell_bounds` (through
  `certfsm.verify.prove_boxes`) and `_cell_engines` (through
  `certfsm.verify.check`), run on verify's worker pool by
  `_cell_workers`, resumed from `_checkpoint`).
- `Table`: a proposed token, a status and an allowed-token row per cell;
  `allowed_masks` from the legality rules; `check_table` and
  `prove_table` (Z3) for the table-level property (`_table`).
- `step`: the one step function of the state machine (`MachineParams`,
  `State`, `Reason`), with `replay` for traces (`_machine`).
- `check_explicit` (explicit-state enumeration, `_explicit`) and
  `prove_machine` (Z3, by induction, `_machine_proofs`) for the machine
  properties; the two must agree (`disagreements`). Each answer is a
  `Proof`: the core's one verdict record (`certfsm.VerdictRecord`) with
  its trace or cell.
- `distill_controller`: the whole `certfsm distill` (distil, prove,
  cross-check, write the artifact and the report), returning a
  `DistillRun` (`_pipeline`, the report in `_distill_report`);
  `render_decision_map` draws the table next to the network over two
  inputs (`_decision_map`).
- `deep_inspect`: `certfsm inspect --deep`, an artifact re-proved from
  its own content and the model (`model_for_artifact` checks the model's
  SHA-256): every exact cell, every witness of the report, every table
  and machine query regenerated and solved; returns a `DeepResult`
  (`_deep_inspect`, the cells in `_deep_cells`).

Importing this package needs neither z3, maraboupy nor onnx; the proof
functions import z3 when called.
"""

from ._deep_cells import CellFailure
from ._deep_inspect import DeepResult, QueryCheck, deep_inspect, model_for_artifact
from ._decision_map import DecisionMap, busiest_slice, default_axes, render_decision_map
from ._distill import ENGINES as DISTILL_ENGINES
from ._distill import Distillation, distill, sampled_cross_check
from ._explicit import alphabet, check_explicit, explore, free_rows, table_rows, transition_violations
from ._grid import OUT_OF_ENVELOPE, Grid
from ._machine import (
    NO_CANDIDATE,
    MachineInput,
    MachineParams,
    Proof,
    Reason,
    State,
    Trace,
    TraceStep,
    initial_state,
    replay,
    step,
)
from ._machine_proofs import StepEncoding, disagreements, invariant_holds, prove_machine
from ._pipeline import CROSS_CHECK_SAMPLES, DistillRun, distill_controller
from ._table import (
    CONSERVATIVE,
    EXACT,
    UNDECIDED,
    CellClass,
    Table,
    TableViolation,
    allowed_masks,
    check_table,
    prove_table,
    rule_meets,
)

__all__ = [
    "CONSERVATIVE",
    "DISTILL_ENGINES",
    "EXACT",
    "NO_CANDIDATE",
    "OUT_OF_ENVELOPE",
    "UNDECIDED",
    "CellClass",
    "DecisionMap",
    "Distillation",
    "CROSS_CHECK_SAMPLES",
    "DistillRun",
    "Grid",
    "MachineInput",
    "MachineParams",
    "Proof",
    "Reason",
    "State",
    "StepEncoding",
    "Table",
    "TableViolation",
    "Trace",
    "TraceStep",
    "allowed_masks",
    "alphabet",
    "busiest_slice",
    "check_explicit",
    "check_table",
    "default_axes",
    "disagreements",
    "distill",
    "distill_controller",
    "explore",
    "free_rows",
    "initial_state",
    "invariant_holds",
    "prove_machine",
    "prove_table",
    "render_decision_map",
    "replay",
    "rule_meets",
    "sampled_cross_check",
    "step",
    "table_rows",
    "transition_violations",
    "CellFailure",
    "DeepResult",
    "QueryCheck",
    "deep_inspect",
    "model_for_artifact",
]
