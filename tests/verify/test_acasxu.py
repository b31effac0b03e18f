"""ACAS Xu instances with published ground truth through `check(engine="auto")`: every verdict must match.

The benchmark is read in place (the `acasxu` fixture in tests/conftest.py: CERTFSM_ACASXU or ``../shared/benchmarks/acasxu``)
and is never copied into the repository; without it these tests are skipped.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from certfsm import load_onnx, run_onnxruntime
from certfsm.verify import _bounds
from certfsm.verify._check import check
from certfsm.verify._vnnlib import parse_vnnlib

pytestmark = pytest.mark.slow


# (network, property): a mix of sat and unsat; the first four need input splitting.
SUBSET = (
    ("1_1", "prop_2"),
    ("1_7", "prop_2"),
    ("3_1", "prop_1"),
    ("4_5", "prop_10"),
    ("4_8", "prop_3"),
    ("5_6", "prop_4"),
    ("2_3", "prop_2"),
    ("1_7", "prop_3"),
    ("1_9", "prop_4"),
    ("1_9", "prop_7"),
)
NEEDS_SPLITTING = SUBSET[:4]


def _expected(folder: Path) -> dict:
    with open(folder / "instances.csv", newline="") as handle:
        return {(row["onnx"], row["vnnlib"]): row["expected"] for row in csv.DictReader(handle)}


def _instance(folder: Path, network: str, prop: str):
    expected = _expected(folder)
    onnx_path = f"onnx/ACASXU_run2a_{network}_batch_2000.onnx"
    vnnlib_path = f"vnnlib/{prop}.vnnlib"
    (box,) = parse_vnnlib(folder / vnnlib_path, 5, 5)
    return load_onnx(folder / onnx_path), box, expected[(onnx_path, vnnlib_path)]


@pytest.mark.parametrize("network_name, prop_name", SUBSET, ids=lambda value: value)
def test_auto_gives_the_published_verdict(network_name, prop_name, acasxu):
    network, prop, expected = _instance(acasxu, network_name, prop_name)
    result = check(network, prop, engine="auto", timeout=116.0)
    assert result.verdict == {"sat": "violated", "unsat": "proved"}[expected], result.reason
    if result.verdict == "violated":
        x = result.counterexample
        assert prop.contains_input(x)
        assert prop.unsafe_slack(network.evaluate(x)) >= 0.0
        assert prop.unsafe_slack(run_onnxruntime(network, x)) >= 0.0
    if (network_name, prop_name) in NEEDS_SPLITTING:
        assert result.stats["boxes"] > 1


@pytest.mark.parametrize("network_name, prop_name", NEEDS_SPLITTING, ids=lambda value: value)
def test_these_instances_really_need_splitting(network_name, prop_name, acasxu):
    network, prop, _ = _instance(acasxu, network_name, prop_name)
    assert _bounds.check(network, prop, 10.0).verdict == "unknown"


def test_the_benchmark_ground_truth_is_read_as_expected(acasxu):
    expected = _expected(acasxu)
    assert len(expected) == 25
    assert sorted(set(expected.values())) == ["sat", "unsat"]
    assert np.sum([value == "sat" for value in expected.values()]) == 10
