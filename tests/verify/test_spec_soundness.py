"""The spec path never answers wrong: `verify_spec` and distillation's exact cells on specs whose answer is known.

Each case is a one-input controller whose score difference BAD - SAFE is
an affine function s*x + t with float64 s and t (each split into three
float32 weights, so the ONNX file holds them exactly), placed a few ulps or
2^-60 from a decimal gate margin or rule bound: the seams where reading a
decimal through float64 once proved a false claim. The exact answer is
computed here in rationals from the decimals as written (the maximum of an
affine function over an interval is at an end), sharing no code with
certfsm. A verdict may be `unknown`; it may never contradict that answer,
and a `violated` must come with a witness that is unsafe exactly.
"""

from __future__ import annotations

import decimal
import json
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from certfsm import load_onnx, load_spec
from certfsm.fsm import EXACT, distill
from certfsm.verify import verify_spec

MARGINS = ("0.1", "0.3", "0.7", "1.1")
BOXES = (("0", "0.3"), ("0.1", "0.7"), ("0.3", "1"), ("0.15", "0.85"))


def offsets(decimal_text: str) -> tuple[Fraction, ...]:
    """How far past a decimal constant the score difference ends: 2^-60 and 2^-70 either side, and half the gap
    between the decimal and its float64 either side (where a constant read through float64 decides wrongly)."""
    gap = abs(Fraction(float(decimal_text)) - Fraction(decimal_text)) / 2
    return tuple(
        sorted({Fraction(1, 2**60), -Fraction(1, 2**60), Fraction(1, 2**70), -Fraction(1, 2**70), gap, -gap} - {0})
    )


def split32(value: Fraction, parts: int = 6) -> list[float]:
    """float32 numbers whose exact sum is `value` to within 2^-130 of it (24 more bits per part)."""
    result, rest = [], Fraction(value)
    for _ in range(parts):
        part = float(np.float32(float(rest)))
        result.append(part)
        rest -= Fraction(part)
    return result


def affine_model(path, s: float, t_parts: list[float]) -> None:
    """x -> (SAFE, BAD) = (0, s*x + sum(t_parts)) for x >= 0, exactly: one ReLU(x) unit per part of s (three)
    and one ReLU(1) unit per part of t."""
    s_parts = split32(Fraction(s), 3)
    count = len(s_parts) + len(t_parts)
    hidden_weight = np.array([[1.0]] * len(s_parts) + [[0.0]] * len(t_parts), dtype=np.float32)
    hidden_bias = np.array([0.0] * len(s_parts) + [1.0] * len(t_parts), dtype=np.float32)
    out_weight = np.array([[0.0] * count, s_parts + list(t_parts)], dtype=np.float32)
    out_bias = np.zeros(2, dtype=np.float32)
    inits = [
        numpy_helper.from_array(a, n)
        for a, n in ((hidden_weight, "W1"), (hidden_bias, "B1"), (out_weight, "W2"), (out_bias, "B2"))
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "B1"], ["z"], transB=1),
        helper.make_node("Relu", ["z"], ["h"]),
        helper.make_node("Gemm", ["h", "W2", "B2"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def exact_sum(parts) -> Fraction:
    return sum((Fraction(p) for p in parts), Fraction(0))


def write_case(folder, box, margin, edges=None, gate="margin"):
    low, high = box
    edges = edges or ["0", "1"]
    text = (
        f'{{"certfsm_spec": 1, "name": "seam", "model": "net.onnx", '
        f'"inputs": [{{"name": "x", "unit": "", "min": 0, "max": 1, "edges": [{", ".join(edges)}]}}], '
        f'"outputs": ["SAFE", "BAD"], "tokens": {{"SAFE": 0, "BAD": 1}}, "legal_tokens": ["SAFE", "BAD"], '
        f'"decision": "argmax", "conservative_token": "SAFE", "confidence_gate": {{"{gate}": {margin}}}, '
        f'"legality_rules": [{{"name": "box", "when": {{"x": {{"min": {low}, "max": {high}}}}}, '
        f'"forbid": ["BAD"]}}]}}'
    )
    (folder / "spec.json").write_text(text)
    json.loads(text)
    return folder / "spec.json"


def cases():
    """(margin, box, sign, which constant the score difference grazes, offset past it)."""
    for margin in MARGINS:
        for box in BOXES:
            for sign in (1, -1):
                end = box[1] if sign > 0 else box[0]
                for offset in offsets(margin):
                    yield margin, box, sign, "margin", offset
                for offset in offsets(end):
                    yield margin, box, sign, "bound", offset


def affine_for(margin: str, box, sign: int, grazed: str, offset: Fraction) -> tuple[float, list[float]]:
    """s = sign and t such that at the box end where s*x + t is largest it equals the grazed constant (the gate
    margin, or 0 for the rule bound itself) plus `offset`."""
    end = Fraction(box[1]) if sign > 0 else Fraction(box[0])
    target = (Fraction(margin) if grazed == "margin" else 0) + offset
    return float(sign), split32(target - sign * end)


def best(box, s: float, t_parts) -> Fraction:
    return max(Fraction(s) * Fraction(end) + exact_sum(t_parts) for end in box)


def judge(result, truth_violated: bool, what: str) -> None:
    if truth_violated:
        assert result.verdict in ("violated", "unknown"), f"{what}: proved, but it is violated exactly"
    else:
        assert result.verdict in ("proved", "unknown"), f"{what}: violated, but it holds exactly"


CASES = list(cases())


@pytest.mark.parametrize("margin, box, sign, grazed, offset", CASES[::5])
def test_verify_never_contradicts_the_exact_answer_at_a_decimal_seam(tmp_path, margin, box, sign, grazed, offset):
    s, t_parts = affine_for(margin, box, sign, grazed, offset)
    affine_model(tmp_path / "net.onnx", s, t_parts)
    spec = load_spec(write_case(tmp_path, box, margin))
    run = verify_spec(spec, engine="auto", timeout=20)
    results = {prop.name: result for prop, result in zip(run.properties, run.results)}
    peak = best(box, s, t_parts)
    what = f"margin {margin}, box {box}, s {s}, t {float(exact_sum(t_parts))!r}"
    judge(results["legality:box"], peak >= 0, f"{what}: BAD never chosen in the box")
    judge(results["legality:box/gated"], peak >= Fraction(margin), f"{what}: BAD never passes the gate")
    for name, result in results.items():
        if result.verdict == "violated":
            x = Fraction(float(np.asarray(result.counterexample).reshape(-1)[0]))
            assert Fraction(box[0]) <= x <= Fraction(box[1])
            bound = Fraction(margin) if name.endswith("/gated") else 0
            assert Fraction(s) * x + exact_sum(t_parts) >= bound, (name, x)


def reference_ln(q: Fraction) -> tuple[Fraction, Fraction]:
    with decimal.localcontext() as context:
        context.prec = 90
        value = Fraction((decimal.Decimal(q.numerator) / decimal.Decimal(q.denominator)).ln())
    return value - Fraction(1, 10**80), value + Fraction(1, 10**80)


@pytest.mark.parametrize("probability", ["0.8", "0.9", "0.75"])
@pytest.mark.parametrize("offset", [-Fraction(1, 2**60), Fraction(1, 2**60), Fraction(1, 2**100)])
def test_a_probability_gate_is_never_proved_on_a_margin_above_the_written_one(tmp_path, probability, offset):
    low_ln, high_ln = reference_ln(Fraction(probability) / (1 - Fraction(probability)))
    box = ("0.3", "1")
    t_parts = split32(low_ln + offset - 1)  # s = 1: the score difference at x = 1 is ln(p / (1 - p)) + offset
    affine_model(tmp_path / "net.onnx", 1.0, t_parts)
    spec = load_spec(write_case(tmp_path, box, probability, gate="probability"))
    run = verify_spec(spec, timeout=20)
    result = next(r for p, r in zip(run.properties, run.results) if p.name == "legality:box/gated")
    peak = 1 + exact_sum(t_parts)
    assert peak >= high_ln or peak < low_ln  # the offsets keep clear of the reference's own uncertainty
    judge(result, peak >= high_ln, f"p = {probability}, offset {offset}")


def exact_decision(s: float, t_parts, margin: Fraction, x: Fraction) -> str:
    return "BAD" if Fraction(s) * x + exact_sum(t_parts) >= margin else "SAFE"


DISTILL_CASES = [(m, g, k, o) for m in ("0.1", "0.7") for g in (1, -1) for k in ("margin",) for o in offsets(m)]


@pytest.mark.slow
@pytest.mark.parametrize("margin, sign, grazed, offset", DISTILL_CASES)
def test_distilled_exact_cells_hold_their_token_on_the_whole_cell_exactly(tmp_path, margin, sign, grazed, offset):
    edges = ["0", "0.3", "0.7", "1"]
    s, t_parts = affine_for(margin, ("0.3", "0.7"), sign, grazed, offset)  # the crossing grazes an edge
    affine_model(tmp_path / "net.onnx", s, t_parts)
    spec = load_spec(write_case(tmp_path, ("0", "1"), margin, edges=edges))
    table = distill(spec, load_onnx(spec.model_path), jobs=1).table
    exact_cells = 0
    for cell in range(3):
        if table.status[cell] != EXACT:
            continue
        exact_cells += 1
        low, high = Fraction(edges[cell]), Fraction(edges[cell + 1])
        top = high if cell == 2 else high - Fraction(1, 2**200)  # half-open cells, the last one closed
        token = spec.outputs[int(table.proposal[cell])]
        for x in (low, top):
            assert exact_decision(s, t_parts, Fraction(margin), x) == token, (cell, x, token)
    assert exact_cells >= 1
