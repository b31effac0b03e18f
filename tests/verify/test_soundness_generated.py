"""Generated soundness instances (`soundness_cases`) through every engine: never a wrong answer, every witness exact.

Why: the soundness-repro cases pin the bugs already found; these tests
hunt for the next ones with fresh instances of the same families. Each
instance is built once per (family, seed) and shared by the engines.
Hypothesis runs derandomized (the same instances on every run) and does
not shrink: a failure names the instance (family-variant-seed), and
`generate(family, seed)` rebuilds it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, numpy_helper

import soundness_cases
from soundness_cases import generate, instances
import soundness_oracle as oracle
from soundness_judge import ENGINES, HAS_MARABOU, NEEDS_MARABOU, check_api, check_cli, engine_params

TIMEOUT = 10.0
ENGINE_TIMEOUTS = {"bounds": 0.2, "marabou": 3.0, "both": 5.0}
"""Engines that get less than TIMEOUT, where more time only buys a longer unknown: bounds alone never closes a
tie, so its unknown after 0.2 s says as much as after 10 s; Marabou alone proves nothing without Z3's agreement
and on some instances runs to its limit, while its known wrong answers (UNSAT on small queries) come at once.
Both engines together get half of it each: Z3 answers these in about a second, and Marabou now and then runs
past its own limit until it is killed (about one run in six of bump-1)."""
FAST_EXAMPLES = 4  # per engine in the fast suite
SEEDS = int(os.environ.get("CERTFSM_SOUNDNESS_SEEDS", "20"))
"""Instances per family through the default engine in the full suite (100 in all); a longer hunt for rare
wrong answers raises it (CERTFSM_SOUNDNESS_SEEDS=200, say) without changing what is checked."""
EVERY_ENGINE_SEEDS = 4
"""The first seeds of each family also go through every other engine: building an instance (its exact answer
from the oracle's Z3) costs more than most engines take to answer it, so the engines share the instances."""
CHUNK = 5
"""Seeds per test, so the parallel workers share a family's instances evenly."""
_RUN = dict(
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)


def _check(instance, engine: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        onnx_path, vnnlib_path = instance.write(Path(folder))
        check_api(onnx_path, vnnlib_path, instance.expected, engine, ENGINE_TIMEOUTS.get(engine, TIMEOUT))


FAST_ENGINES = ("auto",)
"""The default engine runs in the fast set; the others are in the slow set here and below (and in
the fast set of the soundness-repro cases and the conformance suite)."""


def _fast_engine_params() -> list:
    return [
        p if p.values[0] in FAST_ENGINES else pytest.param(*p.values, marks=[*p.marks, pytest.mark.slow], id=p.id)
        for p in engine_params()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("engine", _fast_engine_params())
@settings(max_examples=FAST_EXAMPLES, **_RUN)
@given(instance=instances())
def test_generated_instances_are_never_answered_wrong(engine, instance):
    """A small fixed sample of every family, in the fast set, so a regression shows on every run."""
    _check(instance, engine)


def _shared(family: str) -> pytest.MarkDecorator:
    """One parallel worker for the tests that read a family's first instances, so each is built once."""
    return pytest.mark.xdist_group(f"soundness-{family}")


def _chunks() -> list:
    return [
        pytest.param(
            family,
            first,
            id=f"{family}-seeds{first}-{min(first + CHUNK, SEEDS) - 1}",
            marks=_shared(family) if first == 0 else (),
        )
        for family in soundness_cases.FAMILIES
        for first in range(0, SEEDS, CHUNK)
    ]


_FAMILIES_SHARED = [pytest.param(family, id=family, marks=_shared(family)) for family in soundness_cases.FAMILIES]


@pytest.mark.slow
@pytest.mark.parametrize("family, first", _chunks())
def test_many_generated_instances_are_never_answered_wrong(family, first):
    """SEEDS instances per family through auto, the first EVERY_ENGINE_SEEDS through every engine: rare wrong
    answers need many tries."""
    for seed in range(first, min(first + CHUNK, SEEDS)):
        instance = generate(family, seed)
        for engine in ENGINES if seed < EVERY_ENGINE_SEEDS else ("auto",):
            if engine in NEEDS_MARABOU and not HAS_MARABOU:
                continue  # the conformance suite and the soundness-repro cases say so as a skip with the reason
            _check(instance, engine)


@pytest.mark.slow
@pytest.mark.parametrize("family", _FAMILIES_SHARED)
def test_cli_on_generated_instances(family, tmp_path):
    """The CLI's result file on a few instances of each family: right answer, printed witness exact."""
    for seed in range(2):
        instance = generate(family, seed)
        onnx_path, vnnlib_path = instance.write(tmp_path)
        check_cli(onnx_path, vnnlib_path, instance.expected, tmp_path / f"{instance.name}.txt", TIMEOUT)


# --- the instruments themselves ----------------------------------------------------------


def _as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with float64 weights and data, so onnxruntime computes nearly exactly."""
    double = onnx.ModelProto()
    double.CopyFrom(model)
    for tensor in double.graph.initializer:
        if tensor.data_type == TensorProto.FLOAT:
            tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name))
    for value in list(double.graph.input) + list(double.graph.output):
        value.type.tensor_type.elem_type = TensorProto.DOUBLE
    return double


@settings(max_examples=FAST_EXAMPLES, **_RUN)
@given(instance=instances(), point_seed=st.integers(0, 2**32 - 1))
def test_oracle_evaluates_every_encoding_like_onnxruntime(instance, point_seed):
    """The oracle's own ONNX interpreter must compute what onnxruntime computes (in float64) on the same file."""
    session = onnxruntime.InferenceSession(
        _as_float64(instance.model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    data = session.get_inputs()[0]
    point = np.random.default_rng(point_seed).uniform(-1, 1, oracle.input_count(instance.model))
    runtime = session.run(None, {data.name: point.reshape(data.shape)})[0].reshape(-1)
    exact = np.array([float(y) for y in oracle.exact_outputs(instance.model, point)])
    np.testing.assert_allclose(exact, runtime, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("family", _FAMILIES_SHARED)
def test_every_family_yields_both_answers(family):
    """A family whose instances all have the same answer tests only half of soundness: the first seeds, which every
    engine sees, hold both."""
    answers = {generate(family, seed).expected for seed in range(EVERY_ENGINE_SEEDS)}
    assert answers == {"sat", "unsat"}
