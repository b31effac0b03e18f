"""certfsm.fsm: the grid, the lookup table, the state machine around it, and the proofs of both.

Each concept has one home (the underscore module in brackets). `__all__`
holds what other packages, the CLI, the bench scripts and the README use
(tests/test_house.py holds it to that): `distill` and
`sampled_cross_check`, `distill_controller` with `CROSS_CHECK_SAMPLES`,
`deep_inspect` with `model_for_artifact`, `StepEncoding`, and the values
of `Table.status` (`EXACT`, `CONSERVATIVE`, `UNDECIDED`). The other names
below are this package's own: its modules and its tests import them from
their homes. This package uses only the public names of `certfsm` and
`certfsm.verify`.

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
- the state machine's `step`, `MachineParams`, `State` and `Reason` are
  the core's (`certfsm.machine`); `replay` re-runs a trace (`_machine`).
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

from ._deep_inspect import deep_inspect, model_for_artifact
from ._distill import distill, sampled_cross_check
from ._machine_proofs import StepEncoding
from ._pipeline import CROSS_CHECK_SAMPLES, distill_controller
from ._table import CONSERVATIVE, EXACT, UNDECIDED

__all__ = [
    "CONSERVATIVE",
    "CROSS_CHECK_SAMPLES",
    "EXACT",
    "UNDECIDED",
    "StepEncoding",
    "deep_inspect",
    "distill",
    "distill_controller",
    "model_for_artifact",
    "sampled_cross_check",
]
