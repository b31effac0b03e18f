"""Golden SMT-LIB text of chain-shaped networks: the encoding of a chain must not change by one byte.

Why: report files carry their SHA-256 into artifacts and summaries, so a
chain's script is a published format. These goldens were written by the
encoder before it learnt graph networks (layers that read several
activations); a chain must still give exactly this text. Each case pins
one feature of the encoder: long float32 decimals over several layers, a
folded layer with exact rationals no float holds, strict and non-strict
unsafe rows with open box ends, ReLU phases fixed by bounds, and a real
ACAS Xu network (its text is large, so only its SHA-256 is stored).

Regenerate on purpose with CERTFSM_REGEN_GOLDEN=1.
"""

from __future__ import annotations

import hashlib
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certfsm import AffineLayer, Network
from certfsm.verify._property import Conjunction, Property, chosen_conjunction
from certfsm.verify._smtlib import smtlib_script

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("CERTFSM_REGEN_GOLDEN") == "1"


def float32_layer(weight, bias, source: str) -> AffineLayer:
    """A layer whose weights are the float32 values of the decimals written (long exact decimals)."""
    return AffineLayer(np.array(weight, dtype=np.float32), np.array(bias, dtype=np.float32), source)


def float32_chain() -> tuple[Network, Property, None]:
    """3 inputs, hidden layers of 3 and 2, 3 outputs, float32 weights; "output 1 can be chosen"."""
    network = Network(
        (
            float32_layer([[0.731, -0.42, 0.0], [-1.25, 0.3, 0.911], [0.05, 1.0, -0.667]], [0.1, -0.2, 0.0], "Gemm_0"),
            float32_layer([[1.5, -0.333, 0.25], [-0.7, 0.0, 1.1]], [0.01, 0.3], "Gemm_1"),
            float32_layer([[0.9, -1.0], [-0.45, 0.6], [1.0, 1.0]], [0.0, -0.05, 0.2], "Gemm_2"),
        ),
        source_path="chain.onnx",
    )
    prop = Property("chain_y1_chosen", [-1.0, -0.5, 0.0], [1.0, 0.5, 0.75], (chosen_conjunction(1, 3, "argmax"),))
    return network, prop, None


def folded_exact() -> tuple[Network, Property, None]:
    """A normalisation folded into the first layer: weights 1/3, 2/5 and a bias -1/7 that no float holds."""
    rows = ((Fraction(1, 3), Fraction(2, 5)), (Fraction(-1, 10), Fraction(1)))
    bias = (Fraction(-1, 7), Fraction(1, 2))
    weight = [[float(v) for v in row] for row in rows]
    folded = AffineLayer(weight, [float(v) for v in bias], "Div_0+Gemm_1", exact=(rows, bias))
    network = Network((folded, float32_layer([[1.0, -0.3]], [0.125], "Gemm_2")), source_path="folded.onnx")
    prop = Property("folded_low", [0.0, -1.0], [2.0, 1.0], (Conjunction([[1.0]], [-0.5]),))
    return network, prop, None


def strict_open() -> tuple[Network, Property, None]:
    """Strict and non-strict rows with exact decimals, a disjunction, and open box ends at 1/10 and 3/10."""
    network = Network(
        (
            float32_layer([[1.0, -1.0], [0.5, 0.5]], [0.0, -0.1], "Gemm_0"),
            float32_layer([[1.0, 0.0], [-1.0, 2.0]], [0.0, 0.3], "Gemm_1"),
        ),
        source_path="strict.onnx",
    )
    unsafe = (
        Conjunction([[1.0, -1.0], [0.0, 1.0]], [0.0, 0.1], exact_b=(0, Fraction(1, 10)), strict=(True, False)),
        Conjunction([[-1.0, 0.0]], [-0.7], exact_b=(Fraction(-7, 10),), strict=(True,)),
    )
    prop = Property(
        "strict_open",
        [0.1, -1.0],
        [0.3, 1.0],
        unsafe,
        exact_lower=(Fraction(1, 10), Fraction(-1)),
        exact_upper=(Fraction(3, 10), Fraction(1)),
        open_lower=(True, False),
        open_upper=(False, True),
    )
    return network, prop, None


def phases_given() -> tuple[Network, Property, np.ndarray]:
    """Bounds fixed one ReLU inactive and one active; the third keeps its case split."""
    network = Network(
        (
            float32_layer([[1.0, 0.5], [-1.0, 0.25], [0.2, -0.2]], [-3.0, 3.0, 0.0], "Gemm_0"),
            float32_layer([[1.0, -1.0, 0.5], [0.0, 1.0, -1.0]], [0.0, 0.0], "Gemm_1"),
        ),
        source_path="phases.onnx",
    )
    prop = Property("phases", [-1.0, -1.0], [1.0, 1.0], (chosen_conjunction(0, 2, "argmin"),))
    return network, prop, np.array([-1, 1, 0], dtype=np.int8)


CASES = {case.__name__: case for case in (float32_chain, folded_exact, strict_open, phases_given)}


def check_golden(path: Path, produced: str) -> None:
    """`produced` equals the golden file's text (written first under CERTFSM_REGEN_GOLDEN=1)."""
    if REGENERATE:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(produced.encode("utf-8"))
    assert path.exists(), f"{path} is missing; run with CERTFSM_REGEN_GOLDEN=1 to create it"
    assert produced == path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("name", sorted(CASES))
def test_chain_script_is_the_golden_text(name):
    network, prop, phases = CASES[name]()
    assert network.is_chain
    check_golden(GOLDEN / f"chain_{name}.smt2", smtlib_script(network, prop, "unknown", phases))


def test_acasxu_script_hash_is_the_golden_hash(acasxu):
    """ACAS Xu 1_1 with property 7: 300 ReLUs, float32 weights, about a megabyte of text; its SHA-256 is pinned."""
    from certfsm import load_onnx
    from certfsm.verify._vnnlib import parse_vnnlib

    network = load_onnx(acasxu / "onnx" / "ACASXU_run2a_1_1_batch_2000.onnx")
    [prop] = parse_vnnlib(acasxu / "vnnlib" / "prop_7.vnnlib", network.n_inputs, network.n_outputs)[:1]
    assert network.is_chain
    text = smtlib_script(network, prop, "unsat")
    check_golden(GOLDEN / "chain_acasxu_1_1_prop_7.sha256", hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")
