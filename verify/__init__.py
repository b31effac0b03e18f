"""certfsm.verify: prove properties of a controller network.

Each concept has one home (the underscore module in brackets); everything
outside this package, `certfsm.fsm` and the CLI included, uses only the
names exported here. `__all__` holds what other packages, the CLI, the
bench scripts and the README use (tests/test_house.py holds it to that);
the other names below are this package's own, imported from their homes
by its modules and its tests. The verdicts (`PROVED`, `VIOLATED`,
`UNKNOWN`) are the core's (`certfsm`).

- `Property` / `Conjunction`: an input box and the unsafe set over the
  outputs (a disjunction of conjunctions of linear constraints), the
  VNN-LIB fragment (`_property`); `spec_properties` builds the
  token-range and legality properties of a controller spec
  (`_spec_properties`); `parse_vnnlib` reads a file (`_vnnlib`).
- `check(network, prop, engine="auto"|"marabou"|"z3"|"both"|"bounds",
  timeout=..., jobs=..., budget=...) -> Result` (the core's one verdict
  record, `certfsm.VerdictRecord`, with the counterexample): the one
  entry point (`_check`; the back-ends `_bounds`, `_slopes`, `_split`,
  `_box_engine`, `_marabou`, `_z3` are reached only through it, chosen by
  `_engines`). Verdicts are `proved` (UNSAT or sound bounds over a
  partition of the box), `violated` (a counterexample re-evaluated in
  float64 and onnxruntime, `validate_counterexample`, `_validate`) or
  `unknown` with the reason (`Result`, `_result`). With a `WorkBudget`
  (boxes, Z3 queries, Z3's resource count; `_budget`) ``proved`` does
  not depend on the machine's speed; the timeout is then a guard
  (`WALL_CLOCK_GUARD` in the stats). `falsify` searches for a
  counterexample alone (`_falsify`).
- Many boxes at once: `prove_boxes(network, prop, lower, upper)` proves
  one property on each of many sub-boxes of its box by bounds and
  bisection alone (`BoxProofs`: which boxes are proved, and the work
  done; `_box_batch`); `certfsm.fsm.distill` proves its grid cells with
  it.
- Exact numbers: `exact_outputs` evaluates the network on rationals,
  `exact_decimal` / `plain_decimal` print a float exactly (`_exact`).
- `verify_spec` / `verify_vnnlib`: the two jobs the CLI runs
  (`vnncomp_result`: a VNN-LIB run's answer and result-file text), and
  `check_network_fits_spec`, the one check that a network fits a spec
  (`_run`); `write_report` writes summary.json, report.md and one
  SMT-LIB 2.6 file per query and a proof certificate per proof
  (`_report`, `_certificate`; `write_certificate` writes one on its own,
  for `certfsm vnnlib --certificate`); `recheck_folder` re-runs the
  SMT-LIB files with a stock solver (`_recheck`), and
  `certfsm.checker` re-checks the certificates.
- SMT-LIB and Z3, one door each: `smtlib_text` makes every query script,
  `write_proof_query` writes every non-network proof file (table and
  machine proofs of `certfsm.fsm`) with the same header as `write_smtlib`
  (`_smtlib`), and `solve_text` hands any query text to Z3 (`_z3`; `SharedPrefix` for
  queries that share a long beginning).
- One worker pool: `pool_for` runs tasks inline or in killable, bounded,
  forked worker processes with BLAS on one thread (`InlinePool`,
  `ProcessPool`, both a `WorkerPool`, the interface a distributed
  back-end implements; `single_threaded_blas`, `limit_blas_threads`;
  `_pool`, with solver isolation in `_isolation`); `check`'s branch and
  bound, `certfsm.fsm.distill` and `run_batch` all run on it. Inside
  `ray_workers(address)` the same pools run their tasks on Ray, on this
  machine or a cluster (`_ray_pool`; Ray is imported only there).
- `run_batch(instances_csv, out, jobs=...)` checks a VNN-COMP instance
  list, each instance as `verify_vnnlib` does, and appends one durable
  `ResultRow` per finished instance to a results file it resumes from
  (`BatchRun`, `BatchSummary`; `_batch`, the list in `_instances`, the
  file in `_results_file`).

Importing this package needs neither maraboupy nor z3; the back-ends
import them when called.
"""

from ._batch import run_batch
from ._box_batch import prove_boxes
from ._budget import WALL_CLOCK_GUARD, WorkBudget
from ._certificate import write_cell_certificate, write_certificate
from ._check import ENGINES, check
from ._engines import engines_needed, is_installed, missing_solver
from ._exact import exact_decimal, exact_outputs
from ._falsify import falsify
from ._pool import pool_for, ray_workers, single_threaded_blas
from ._property import Conjunction, Property, chosen_conjunction
from ._recheck import RECHECK_OUTCOMES, recheck_folder
from ._report import InputNaming, model_summary, spec_summary, write_report
from ._run import check_network_fits_spec, verify_spec, verify_vnnlib, vnncomp_result
from ._smtlib import smtlib_text, write_proof_query
from ._spec_properties import spec_properties
from ._vnnlib import parse_vnnlib
from ._z3 import SharedPrefix, solve_text

__all__ = [
    "ENGINES",
    "RECHECK_OUTCOMES",
    "WALL_CLOCK_GUARD",
    "Conjunction",
    "InputNaming",
    "Property",
    "SharedPrefix",
    "WorkBudget",
    "check",
    "check_network_fits_spec",
    "chosen_conjunction",
    "engines_needed",
    "exact_decimal",
    "exact_outputs",
    "falsify",
    "is_installed",
    "missing_solver",
    "model_summary",
    "parse_vnnlib",
    "pool_for",
    "ray_workers",
    "prove_boxes",
    "recheck_folder",
    "run_batch",
    "single_threaded_blas",
    "smtlib_text",
    "solve_text",
    "spec_properties",
    "spec_summary",
    "verify_spec",
    "verify_vnnlib",
    "vnncomp_result",
    "write_cell_certificate",
    "write_certificate",
    "write_proof_query",
    "write_report",
]
