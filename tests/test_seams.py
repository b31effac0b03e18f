"""The cases of ../shared/benchmarks/seams, where the spec path or the runtime once broke a claim, answered right.

Each is read in place (CERTFSM_SEAMS names another folder) and skipped with
the reason where it is absent. What is true of each is in the folder's
README; the checks below hold certfsm to it, re-evaluating witnesses with
the independent exact interpreter of tests/verify/soundness_oracle.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certfsm import SpecError, load_onnx, load_spec, run_onnxruntime

sys.path.insert(0, str(Path(__file__).parent / "verify"))
import soundness_oracle as oracle  # noqa: E402  (the exact interpreter that shares no code with certfsm)

SEAMS = Path(os.environ.get("CERTFSM_SEAMS") or Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "seams")


def seam(name: str) -> Path:
    folder = SEAMS / name
    if not (folder / "spec.json").exists():
        pytest.skip(f"{folder} is absent (set CERTFSM_SEAMS to the seams folder of the shared benchmarks)")
    return folder


def copied(name: str, tmp_path: Path) -> Path:
    for item in seam(name).iterdir():
        shutil.copy(item, tmp_path / item.name)
    return tmp_path / "spec.json"


def results_of(spec_path: Path) -> dict:
    from certfsm.verify import verify_spec

    run = verify_spec(load_spec(spec_path), timeout=30)
    return {prop.name: result for prop, result in zip(run.properties, run.results)}


def test_gate_margin_decimal_is_violated_with_a_witness_that_is_unsafe_exactly_in_float64_and_onnxruntime(tmp_path):
    spec_path = copied("gate-margin-decimal", tmp_path)
    result = results_of(spec_path)["legality:no-bad/gated"]
    assert result.verdict == "violated", result.reason
    x = np.asarray(result.counterexample, dtype=np.float64).reshape(-1)
    model = oracle.load_model(tmp_path / "net.onnx")
    safe, bad = oracle.exact_outputs(model, [Fraction(float(v)) for v in x])
    assert bad - safe >= Fraction(1, 10)  # BAD passes the written gate, 0.1 read as 1/10
    network = load_onnx(tmp_path / "net.onnx")
    for scores in (network.evaluate(x), np.asarray(run_onnxruntime(network, x)).reshape(-1)):
        assert scores[1] - scores[0] >= 0.1


def test_rule_bound_decimal_is_never_proved(tmp_path):
    result = results_of(copied("rule-bound-decimal", tmp_path))["legality:no-bad-low"]
    assert result.verdict != "proved", "BAD wins for x > c with float64(0.3) < c < 3/10, inside the box x <= 0.3"


@pytest.mark.slow
def test_blob_off_grid_keeps_85_02_in_the_rule_box_and_the_fixed_point_path_refuses_the_edge(tmp_path):
    from certfsm.fsm import distill
    from certfsm.machine import Machine, MachineParams
    from certfsm.runtime import Controller
    from certfsm.runtime._blob import BlobLayout

    spec = load_spec(copied("blob-off-grid", tmp_path))
    table = distill(spec, load_onnx(spec.model_path), jobs=1).table
    layout = BlobLayout.for_inputs(spec.inputs)
    decoded = layout.decode(layout.encode([85.02, 0.5]))
    assert Fraction(decoded[0]) >= Fraction("85.01")  # the decoded reading is still inside the rule box
    machine = Machine(
        names=("temperature", "z"),
        edges=tuple(i.edges for i in spec.inputs),
        frac_bits=(4, 4),
        tokens=spec.outputs,
        proposal=tuple(int(p) for p in table.proposal),
        exact=(True,) * 2,
        allowed=tuple(int(sum(1 << k for k, a in enumerate(row) if a)) for row in table.allowed),
        params=MachineParams.from_spec(spec),
    )
    decision = Controller(machine).step(list(decoded))
    assert decision.token != "BAD"
    with pytest.raises(
        SpecError,
        match=r"^inputs\[0\] \(temperature\): edges\[1\]=85\.01 is not a multiple of 2\^-4 "
        r"\(the nearest are 85\.0 and 85\.0625\)",
    ):
        Controller(machine).step_fixed([int(85.02 * 16), 8])
