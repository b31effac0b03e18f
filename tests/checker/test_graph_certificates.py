"""End to end on graph networks: certfsm proves a VNN-LIB property of an ONNX DAG, the independent checker accepts
the certificate, and refuses it, naming a leaf, once its evidence or the network's weights are changed.

The prover reads the graph with its loader (`certfsm._onnx_graph`) and the checker with its own
(`certfsm.checker._arith`); they share no code, so a certificate that checks says both read the same network and
number its hidden neurons alike.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from graph_models import N_INPUTS, build, run_onnxruntime
from onnx import numpy_helper

from certfsm.checker import check_certificate


def _vnnlib(folder: Path, model: Path, n: int, margin: float = 0.05) -> tuple[Path, float]:
    """y0 - y1 <= (its minimum over a sample of [-0.5, 0.5]^n) - margin: unreachable, so the property holds."""
    outputs = run_onnxruntime(model, np.random.default_rng(0).uniform(-0.5, 0.5, (2000, n)))
    rhs = float(f"{np.min(outputs[:, 0] - outputs[:, 1]) - margin:.6f}")
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(n))
    text += "".join(f"(declare-const Y_{j} Real)\n" for j in range(outputs.shape[1]))
    text += "".join(f"(assert (>= X_{i} -0.5))\n(assert (<= X_{i} 0.5))\n" for i in range(n))
    text += f"(assert (<= (- Y_0 Y_1) {rhs!r}))\n"
    path = folder / "p.vnnlib"
    path.write_text(text)
    return path, rhs


def _falsified(model: Path, out: Path, n: int, rhs: float) -> Path:
    """The model with one weight changed by 10 so that onnxruntime reaches y0 - y1 <= rhs in [-0.5, 0.5]^n: the
    property is false for it, so no certificate may check."""
    points = np.random.default_rng(1).uniform(-0.5, 0.5, (500, n))
    for index, tensor in enumerate(onnx.load(model).graph.initializer):
        for change in (10.0, -10.0):
            graph = onnx.load(model)
            tensor = graph.graph.initializer[index]
            weight = numpy_helper.to_array(tensor).copy()
            if weight.dtype != np.float32:
                break
            weight.flat[0] += np.float32(change)
            tensor.CopyFrom(numpy_helper.from_array(weight, tensor.name))
            onnx.save(graph, out)
            outputs = run_onnxruntime(out, points)
            if np.min(outputs[:, 0] - outputs[:, 1]) < rhs - 1e-3:
                return out
    raise AssertionError("no change of one weight by 10 falsifies the property")


def _break_evidence(leaf: dict) -> None:
    bounds = leaf["bounds"]
    if "row" in bounds:
        bounds["slopes"] = "zero" if bounds["slopes"] != "zero" else "one"
    else:
        bounds["slopes"] = [1.0 - s for s in bounds["slopes"]]


@pytest.mark.parametrize("kind", ["chain", "summed", "sliced", "skip"])
def test_a_proof_on_a_graph_checks_and_a_changed_one_is_refused(tmp_path, kind):
    from cli_in_process import run_main

    model = build(kind, tmp_path / "m.onnx", 0)
    prop, rhs = _vnnlib(tmp_path, model, N_INPUTS[kind])
    report = tmp_path / "report"
    code, out, err = run_main("vnnlib", model, prop, "--report", report, "--engine", "bounds", "--jobs", "1")
    assert code == 0 and out.startswith("unsat"), out + err
    code, out, err = run_main("check-proof", "--report", report)
    assert code == 0 and "checked" in out, out + err
    (name,) = [e["certificate"] for e in json.loads((report / "summary.json").read_text())["properties"]]
    cert = report / name
    document = json.loads(cert.read_text())

    refused = 0
    for proof in range(len(document["proofs"])):
        for k, leaf in enumerate(document["proofs"][proof]["leaves"]):
            if "bounds" not in leaf:
                continue
            changed = json.loads(cert.read_text())
            _break_evidence(changed["proofs"][proof]["leaves"][k])
            mutated = tmp_path / "mutated.cert.json"
            mutated.write_text(json.dumps(changed))
            outcome = check_certificate(mutated, model)
            refused += not outcome.ok
            assert outcome.ok or f"leaf {k}" in outcome.failure, outcome.failure
    if kind != "skip":  # the skip model's proof is one leaf that every slope choice closes, so a change stays valid
        assert refused >= 1

    changed = _falsified(model, tmp_path / "changed.onnx", N_INPUTS[kind], rhs)
    document["network_sha256"] = hashlib.sha256(changed.read_bytes()).hexdigest()
    mutated.write_text(json.dumps(document))
    outcome = check_certificate(mutated, changed)
    assert not outcome.ok and "leaf" in outcome.failure, outcome.failure

    cert.write_text(cert.read_text() + " ")  # changed since the report hashed it
    code, out, err = run_main("check-proof", "--report", report)
    assert code == 1 and "FAILED: missing or changed since summary.json hashed it" in out, out + err
