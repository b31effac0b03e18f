"""load_spec under fuzzing: every mutated spec file gives a ControllerSpec or one SpecError line, within seconds.

The seeds are the shipped example spec and a variant with `bins` and a
probability gate, so every section of the format is there to damage. The
tokens are JSON's structure and the values that once crashed or hung the
reader (deep nesting, long integers, huge lists).
"""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given

from certfsm._errors import SpecError
from certfsm.examples import example_spec_path
from parse_contract import FAST, SLOW, check_bytes, mutated, parser_fixture


def _seeds() -> list[bytes]:
    example = example_spec_path("coadapt").read_bytes()
    variant = json.loads(example)
    variant["inputs"][0].pop("edges")
    variant["inputs"][0]["bins"] = 4
    variant["confidence_gate"] = {"probability": 0.6}
    return [example, json.dumps(variant, indent=1).encode()]


SEEDS = _seeds()
TOKENS = [
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b":",
    b",",
    b" ",
    b"\\",
    b"null",
    b"true",
    b"1e999",
    b"-",
    b"0",
    b"9",
    b'"KEEP", ',
    b'{"a": 1}, ',
    b"1.5, ",
    b"\xff",
    b'"\\ud800"',
]
NESTINGS = [(b"[", b"]"), (b'{"a": ', b"}"), (b"[{}, ", b"]")]
FILES = mutated(SEEDS, TOKENS, NESTINGS)


parse = parser_fixture("certfsm._spec_reading.load_spec")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """The file to parse, beside the models the example specs name (load_spec checks the model exists)."""
    folder = tmp_path_factory.mktemp("spec-fuzz")
    for name in ("coadapt", "coadapt_unsafe"):
        model = example_spec_path(name).parent / f"{name}.onnx"
        shutil.copy(model, folder / model.name)
    return folder / "case.json"


def _check(parse, case, data: bytes) -> None:
    check_bytes(parse, case, data, SpecError, "ControllerSpec")


@pytest.mark.slow
def test_the_seeds_load(parse, case):
    for seed in SEEDS:
        _check(parse, case, seed)


@pytest.mark.slow
@FAST
@given(data=FILES)
def test_mutated_specs_load_or_give_one_line(parse, case, data):
    _check(parse, case, data)


@pytest.mark.slow
@SLOW
@given(data=FILES)
def test_many_mutated_specs_load_or_give_one_line(parse, case, data):
    _check(parse, case, data)
