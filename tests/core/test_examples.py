"""The shipped example controllers: reproducible, runnable, and safe (or unsafe) as advertised.

These tests read the files with json and onnxruntime only, so they do not
depend on certfsm's own spec and ONNX loaders.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

from certfsm._errors import SpecError
from certfsm.examples import EXAMPLE_NAMES, example_spec_path

N_SAMPLES = 100_000
GATE_MARGIN = 0.5


def load_spec(name: str) -> dict:
    return json.loads(example_spec_path(name).read_text(encoding="utf-8"))


def model_path(name: str) -> pathlib.Path:
    return example_spec_path(name).parent / load_spec(name)["model"]


def batch_scores(name: str, x: np.ndarray) -> np.ndarray:
    """Scores from onnxruntime for a batch of readings, in one run of the shipped model (its batch is free)."""
    session = onnxruntime.InferenceSession(str(model_path(name)), providers=["CPUExecutionProvider"])
    return session.run(None, {"probes": x.astype(np.float32)})[0].astype(np.float64)


def sample(spec: dict, seed: int, when: dict | None = None) -> np.ndarray:
    """Uniform points of the envelope, or of a legality rule's `when` box clipped to it."""
    lower = np.array([float(entry["min"]) for entry in spec["inputs"]])
    upper = np.array([float(entry["max"]) for entry in spec["inputs"]])
    for index, entry in enumerate(spec["inputs"]):
        bounds = (when or {}).get(entry["name"], {})
        lower[index] = max(lower[index], bounds.get("min", lower[index]))
        upper[index] = min(upper[index], bounds.get("max", upper[index]))
    return np.random.default_rng(seed).uniform(lower, upper, size=(N_SAMPLES, len(lower)))


def loss_margin(scores: np.ndarray, index: int) -> np.ndarray:
    """Per sample, how far output `index` stays below the best other output (> 0: it never wins, ties included)."""
    return np.delete(scores, index, axis=1).max(axis=1) - scores[:, index]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_spec_path_resolves_to_a_spec_next_to_its_model(name):
    path = example_spec_path(name)
    spec = load_spec(name)
    assert path.is_file() and path.name == f"{name}.spec.json"
    assert spec["certfsm_spec"] == 1
    assert (path.parent / spec["model"]).is_file()


def test_example_spec_path_defaults_to_the_safe_example():
    assert example_spec_path() == example_spec_path("coadapt")


def test_example_spec_path_rejects_an_unknown_name():
    with pytest.raises(
        SpecError, match=r"^example name='nope' is not a shipped example; use one of coadapt, coadapt_unsafe$"
    ):
        example_spec_path("nope")


def test_specs_differ_only_in_name_description_and_model():
    safe, unsafe = load_spec("coadapt"), load_spec("coadapt_unsafe")
    assert (safe["name"], unsafe["name"]) == ("coadapt", "coadapt-unsafe")
    assert (safe["model"], unsafe["model"]) == ("coadapt.onnx", "coadapt_unsafe.onnx")
    for key in ("name", "description", "model"):
        del safe[key], unsafe[key]
    assert safe == unsafe


def test_spec_puts_rule_thresholds_on_bin_edges_and_retires_sparse():
    spec = load_spec("coadapt")
    inputs = {entry["name"]: entry for entry in spec["inputs"]}
    assert list(inputs) == ["compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth"]
    for rule in spec["legality_rules"]:
        for input_name, bounds in rule["when"].items():
            assert bounds["min"] in inputs[input_name]["edges"], rule["name"]
    assert spec["outputs"] == ["KEEP", "FUSE_CONV", "INT4", "OFFLOAD_CPU", "SPARSE_2_4"]
    assert "SPARSE_2_4" not in spec["legal_tokens"]
    assert spec["confidence_gate"] == {"margin": GATE_MARGIN}


def test_spec_edges_are_exact_in_each_inputs_fixed_point():
    for entry in load_spec("coadapt")["inputs"]:
        scaled = [edge * 2 ** entry["frac_bits"] for edge in entry["edges"]]
        assert scaled == [int(value) for value in scaled], entry["name"]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_first_layer_reads_one_probe_per_unit(name):
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(model_path(name))).graph.initializer}
    assert np.count_nonzero(weights["dense1.weight"], axis=1).tolist() == [1] * 8


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_shipped_onnx_is_valid_and_evaluates_in_onnxruntime(name):
    model = onnx.load(str(model_path(name)))
    onnx.checker.check_model(model, full_check=True)
    assert [node.op_type for node in model.graph.node] == [
        "Sub",
        "Div",
        "Gemm",
        "Relu",
        "MatMul",
        "Add",
        "Relu",
        "Gemm",
    ]
    assert all(initializer.data_type == onnx.TensorProto.FLOAT for initializer in model.graph.initializer)
    session = onnxruntime.InferenceSession(str(model_path(name)), providers=["CPUExecutionProvider"])
    (probe,) = session.get_inputs()
    assert (probe.name, probe.shape) == ("probes", ["batch", 5])  # a free batch: one run scores many readings
    readings = np.array([[50.0, 50, 50, 60, 32], [0, 100, 20, 95, 0], [100, 0, 80, 30, 64]])
    scores = session.run(["scores"], {"probes": readings.astype(np.float32)})[0]
    assert scores.shape == (3, 5) and scores.dtype == np.float32
    assert np.all(np.isfinite(scores))
    assert np.array_equal(batch_scores(name, readings), scores.astype(np.float64))


def test_safe_example_never_picks_an_illegal_token_over_the_envelope():
    spec = load_spec("coadapt")
    scores = batch_scores("coadapt", sample(spec, seed=1))
    for index, token in enumerate(spec["outputs"]):
        if token not in spec["legal_tokens"]:
            assert np.min(loss_margin(scores, index)) > GATE_MARGIN, token
    decisions = np.argmax(scores, axis=1)
    assert set(np.unique(decisions)) == {0, 1, 2, 3}, "the example should use every legal token somewhere"


@pytest.mark.parametrize("rule_index", [0, 1])
def test_safe_example_never_picks_a_forbidden_token_inside_a_rule_box(rule_index):
    spec = load_spec("coadapt")
    rule = spec["legality_rules"][rule_index]
    scores = batch_scores("coadapt", sample(spec, seed=2 + rule_index, when=rule["when"]))
    for token in rule["forbid"]:
        assert np.min(loss_margin(scores, spec["outputs"].index(token))) > GATE_MARGIN, (rule["name"], token)


def test_unsafe_example_picks_int4_when_hot():
    spec = load_spec("coadapt_unsafe")
    rule = spec["legality_rules"][0]
    assert (rule["name"], rule["forbid"]) == ("no-int4-when-hot", ["INT4"])
    x = sample(spec, seed=4, when=rule["when"])
    scores = batch_scores("coadapt_unsafe", x)
    int4 = spec["outputs"].index("INT4")
    margins = loss_margin(scores, int4)
    assert np.count_nonzero(margins <= -GATE_MARGIN) >= N_SAMPLES // 10, "the violating region should be large"
    witness = x[np.argmin(margins)].astype(np.float32).reshape(1, -1)
    assert witness[0, 3] >= 85.0
    session = onnxruntime.InferenceSession(str(model_path("coadapt_unsafe")), providers=["CPUExecutionProvider"])
    assert int(np.argmax(session.run(["scores"], {"probes": witness})[0])) == int4


def test_unsafe_example_keeps_the_other_rule_and_the_token_range():
    spec = load_spec("coadapt_unsafe")
    everywhere = batch_scores("coadapt_unsafe", sample(spec, seed=5))
    assert np.min(loss_margin(everywhere, spec["outputs"].index("SPARSE_2_4"))) > GATE_MARGIN
    queue_full = batch_scores("coadapt_unsafe", sample(spec, seed=6, when=spec["legality_rules"][1]["when"]))
    assert np.min(loss_margin(queue_full, spec["outputs"].index("OFFLOAD_CPU"))) > GATE_MARGIN


@pytest.mark.slow
def test_regeneration_is_byte_identical_to_the_shipped_files(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "certfsm.examples.make_example", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    shipped = example_spec_path().parent
    for name in EXAMPLE_NAMES:
        for file_name in (f"{name}.onnx", f"{name}.spec.json"):
            assert (tmp_path / file_name).read_bytes() == (shipped / file_name).read_bytes(), file_name
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        f"{name}{suffix}" for name in EXAMPLE_NAMES for suffix in (".onnx", ".spec.json")
    )


def test_the_shipped_trace_is_what_make_trace_writes():
    """The recorded trace is generated, not edited by hand: the script reproduces the shipped file byte for byte."""
    from certfsm.examples import example_trace_path
    from certfsm.examples.make_trace import COLUMNS, rows

    expected = ",".join(COLUMNS) + "\n" + "".join(",".join(cells) + "\n" for cells in rows())
    assert example_trace_path().read_text(encoding="utf-8") == expected
