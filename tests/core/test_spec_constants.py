"""Every spec constant is the exact decimal written: read from the JSON text, refused when certfsm could not keep it.

The reference here is `fractions.Fraction` of the text as written; nothing
of certfsm's reading is reused to say what a constant should be.
"""

from __future__ import annotations

import decimal
import json
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from certfsm import decimal_value
from certfsm._decision import margin_bounds, margin_from_probability
from certfsm._errors import SpecError
from certfsm import load_spec

SPEC_TEXT = """{
  "certfsm_spec": 1, "name": "constants", "model": "net.onnx",
  "inputs": [
    {"name": "x", "unit": "", "min": <MIN>, "max": <MAX>, "edges": [<MIN>, <EDGE>, <MAX>]},
    {"name": "y", "unit": "", "min": 0, "max": 1, "bins": 3}
  ],
  "outputs": ["SAFE", "BAD"], "tokens": {"SAFE": 0, "BAD": 1}, "legal_tokens": ["SAFE", "BAD"],
  "decision": "argmax", "conservative_token": "SAFE",
  "confidence_gate": {"margin": <MARGIN>},
  "legality_rules": [{"name": "low", "when": {"x": {"min": <RULE_MIN>, "max": <RULE_MAX>}}, "forbid": ["BAD"]}],
  "sla": {"paths": [{"name": "p", "metric": "latency", "limit": <LIMIT>, "window": 4, "max_violations": 1,
                     "recovery_cycles": 2}]}
}"""
CONSTANTS = {
    "MIN": "0.1",
    "EDGE": "0.3",
    "MAX": "0.7",
    "MARGIN": "0.1",
    "RULE_MIN": "0.15",
    "RULE_MAX": "0.35",
    "LIMIT": "20.01",
}


def spec_text(**changes) -> str:
    text = SPEC_TEXT
    for name, value in {**CONSTANTS, **changes}.items():
        text = text.replace(f"<{name}>", value)
    return text


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "net.onnx").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load(folder, text: str):
    (folder / "spec.json").write_text(text)
    return load_spec("spec.json")


def test_every_constant_means_the_decimal_written(folder):
    spec = load(folder, spec_text())
    x = spec.inputs[0]
    assert [decimal_value(v) for v in (x.min, *x.edges, x.max)] == [
        Fraction(t) for t in ("0.1", "0.1", "0.3", "0.7", "0.7")
    ]
    rule = spec.rules[0]
    assert (decimal_value(rule.lower[0]), decimal_value(rule.upper[0])) == (Fraction("0.15"), Fraction("0.35"))
    assert spec.gate_bounds == (Fraction(1, 10), Fraction(1, 10))
    assert decimal_value(spec.sla_paths[0].limit) == Fraction("20.01")
    # the float64 that carries 0.3 is below 3/10: reading it through float would be another number
    assert Fraction(x.edges[1]) < Fraction(3, 10) == decimal_value(x.edges[1])


@pytest.mark.parametrize(
    "constant, where",
    [
        ("MIN", r"inputs\[0\]\.min"),
        ("EDGE", r"inputs\[0\]\.edges\[1\]"),
        ("MAX", r"inputs\[0\]\.max"),
        ("MARGIN", r"confidence_gate\.margin"),
        ("RULE_MIN", r"legality_rules\[0\]\.when\.x\.min"),
        ("RULE_MAX", r"legality_rules\[0\]\.when\.x\.max"),
        ("LIMIT", r"sla\.paths\[0\]\.limit"),
    ],
)
def test_a_decimal_with_more_digits_than_certfsm_keeps_is_refused_at_every_constant(folder, constant, where):
    value = {
        "MIN": "0.10000000000000001",
        "EDGE": "0.30000000000000001",
        "MAX": "0.70000000000000001",
        "MARGIN": "0.1000000000000000055511151231257827021181583404541015625",
        "RULE_MIN": "0.15000000000000001",
        "RULE_MAX": "0.35000000000000001",
        "LIMIT": "20.010000000000001",
    }
    changes = {constant: value[constant]}
    with pytest.raises(
        SpecError,
        match=rf"^spec\.json: {where}: \S+ has more digits than certfsm keeps exactly "
        r"\(a float64 holds it as \S+, another number\); write the decimal you mean "
        r"with at most 17 significant digits, e\.g\. \S+$",
    ):
        load(folder, spec_text(**changes))


@pytest.mark.parametrize("text", ["9007199254740993", "1152921504606846977"])
def test_an_integer_that_no_float64_holds_is_refused(folder, text):
    with pytest.raises(SpecError, match=r"^spec\.json: sla\.paths\[0\]\.limit: \d+ has more digits than certfsm keeps"):
        load(folder, spec_text(LIMIT=text))


@pytest.mark.parametrize("text", ["0.10", "1e-1", "0.1000", "85.010", "2e0", "20"])
def test_the_same_decimal_written_another_way_is_accepted(folder, text):
    spec = load(folder, spec_text(MARGIN=text))
    assert spec.gate_bounds == (Fraction(text), Fraction(text))


def test_a_huge_exponent_is_refused_at_once(folder):
    with pytest.raises(SpecError, match=r"^spec\.json: confidence_gate\.margin: 1e-999999999 has more digits"):
        load(folder, spec_text(MARGIN="1e-999999999"))


# ------------------------------------------------------------------ the probability gate


def reference_ln(q: Fraction, digits: int = 80) -> Fraction:
    """ln(q) to `digits` digits by decimal's own ln of one quotient (another computation than certfsm's)."""
    with decimal.localcontext() as context:
        context.prec = digits
        return Fraction((decimal.Decimal(q.numerator) / decimal.Decimal(q.denominator)).ln())


@given(st.decimals(min_value="0.2001", max_value="0.9999", places=4), st.integers(2, 6))
def test_the_probability_gate_margin_is_enclosed_by_rational_bounds(p, k):
    probability = float(str(p))
    q = (k - 1) * Fraction(str(p)) / (1 - Fraction(str(p)))
    if q <= 1:
        return
    low, high = margin_bounds(probability=probability, n_tokens=k)
    reference = reference_ln(q)  # within about 1e-78 of ln(q); the bounds stand about 1e-49 off it
    assert low < reference < high
    assert 0 < high - low < Fraction(1, 10**40)


def test_the_probability_gate_for_p_0_8_and_two_tokens_encloses_ln_4_though_float_log_rounds_up():
    low, high = margin_bounds(probability=0.8, n_tokens=2)
    ln4 = reference_ln(Fraction(4))
    assert low < ln4 < high
    assert Fraction(margin_from_probability(0.8, 2)) > ln4  # the float64 margin, ln(0.8 / (1 - 0.8)), lies above it


def test_a_spec_with_a_probability_gate_carries_its_exact_bounds(folder):
    text = spec_text().replace('"confidence_gate": {"margin": 0.1}', '"confidence_gate": {"probability": 0.8}')
    spec = load(folder, text)
    low, high = spec.gate_bounds
    assert low < reference_ln(Fraction(4)) < high
    assert json.loads(text)["confidence_gate"] == {"probability": 0.8}
