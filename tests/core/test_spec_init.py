"""`certfsm spec init` and `certfsm.starting_spec`: a spec to start from, never valid over a guessed envelope."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from certfsm import AffineLayer, ModelError, Network, SpecError, load_spec, starting_spec
from certfsm._onnx import to_onnx
from certfsm.examples import example_spec_path

from cli_in_process import run_main
from cli_run import run_cli

MODEL = example_spec_path("coadapt").parent / "coadapt.onnx"
UNFILLED_MIN = (
    r"inputs\[0\]\.min is not filled in \(null\); write the lowest value this input takes in service, in the "
    r"physical unit the network reads \(name it in inputs\[0\]\.unit\): every proof covers \[min, max\], so take "
    r"the range from the plant, not from the model$"
)


def one_line_error(code: int, err: str, pattern: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert re.match(pattern, lines[0]), lines[0]


def fill(path, low=0, high=100, **changes):
    """Write every input's envelope (and any top-level `changes`) into the spec at `path`, as a user would."""
    document = json.loads(path.read_text())
    for item in document["inputs"]:
        item["min"], item["max"] = low, high
    document.update(changes)
    path.write_text(json.dumps(document, indent=2))
    return path


def test_the_starting_spec_takes_inputs_and_tokens_from_the_model_and_leaves_every_envelope_null(tmp_path):
    document = starting_spec(MODEL, spec_path=tmp_path / "specs" / "fan.spec.json")
    assert not document["model"].startswith("/") and document["model"].endswith("certfsm/examples/coadapt.onnx")
    assert (tmp_path / "specs" / document["model"]).resolve() == MODEL.resolve()
    assert [item["name"] for item in document["inputs"]] == ["x0", "x1", "x2", "x3", "x4"]
    assert all(item["min"] is None and item["max"] is None for item in document["inputs"])
    assert all(item["unit"] == "" and "frac_bits" not in item for item in document["inputs"])
    assert document["outputs"] == ["t0", "t1", "t2", "t3", "t4"]
    assert document["tokens"] == {"t0": 0, "t1": 1, "t2": 2, "t3": 3, "t4": 4}
    assert document["legal_tokens"] == document["outputs"] and document["conservative_token"] == "t0"
    assert document["decision"] == "argmax" and document["legality_rules"] == []
    assert document["hysteresis"] == {"confirm_cycles": 1, "cooldown_cycles": 0}
    assert "confidence_gate" not in document and document["name"] == "coadapt"
    assert starting_spec(MODEL)["model"] == str(MODEL)


def test_spec_init_writes_a_spec_that_spec_check_refuses_until_each_envelope_is_filled(tmp_path):
    spec = tmp_path / "fan.spec.json"
    code, out, err = run_main("spec", "init", "--model", MODEL, "--out", spec)
    assert code == 0, err
    assert out.splitlines()[0] == (
        f"{spec}: a starting spec for {MODEL}: 5 inputs (x0..x4), 5 tokens (t0..t4), not valid until each input's "
        "envelope is filled in"
    )
    assert out.splitlines()[1].startswith("next: fill in every input's min and max (now null)")
    assert out.splitlines()[-1] == f"then: certfsm spec check {spec}"
    code, out, err = run_main("spec", "check", spec)
    one_line_error(code, err, rf"^certfsm: error: {re.escape(str(spec))}: {UNFILLED_MIN}")

    document = json.loads(spec.read_text())
    document["inputs"][0]["min"] = -5
    spec.write_text(json.dumps(document))
    code, out, err = run_main("spec", "check", spec)
    one_line_error(
        code,
        err,
        r"^certfsm: error: .*fan\.spec\.json: inputs\[0\]\.max is not filled in \(null\); "
        r"write the highest value this input takes in service",
    )

    fill(spec)
    code, out, err = run_main("spec", "check", spec)
    assert code == 0, err
    assert out.rstrip().endswith(f"{spec}: ok")
    assert "grid: 4 x 4 x 4 x 4 x 4 = 1024 cells" in out.splitlines()
    assert (
        "hardware: export-verilog and export-c will refuse this spec's artifact: inputs x0, x1, x2, x3, x4 have no "
        "frac_bits; give each input frac_bits f (its hardware value v means v * 2^-f) before you distil"
    ) in out.splitlines()


def test_a_null_elsewhere_reads_as_what_to_fill_in(tmp_path):
    path = tmp_path / "s.spec.json"
    run_main("spec", "init", "--model", MODEL, "--out", path)
    fill(path, decision=None)
    with pytest.raises(
        SpecError, match=r": decision is not filled in \(null\); write the value it needs \(how the network.s scores"
    ):
        load_spec(path)


@pytest.mark.slow
def test_the_filled_spec_verifies(tmp_path):
    spec = tmp_path / "fan.spec.json"
    assert run_main("spec", "init", "--model", MODEL, "--out", spec)[0] == 0
    fill(spec, low=0, high=100)
    code, out, err = run_cli("verify", spec, "--report", tmp_path / "report", "--no-progress")
    assert code == 0, out + err
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert [(p["property"], p["verdict"]) for p in summary["properties"]] == [("token_range", "proved")]


def test_spec_init_never_overwrites_a_file(tmp_path):
    spec = tmp_path / "mine.json"
    spec.write_text("my own spec")
    code, out, err = run_main("spec", "init", "--model", MODEL, "--out", spec)
    one_line_error(
        code,
        err,
        rf"^certfsm: error: --out {re.escape(str(spec))} already exists; spec init never overwrites a file, give "
        r"another --out or move it away$",
    )
    assert spec.read_text() == "my own spec" and out == ""


def test_spec_init_writes_beside_the_model_by_default_and_refuses_a_second_time(tmp_path):
    model = tmp_path / "fan.onnx"
    model.write_bytes(MODEL.read_bytes())
    assert run_main("spec", "init", "--model", model)[0] == 0
    written = json.loads((tmp_path / "fan.spec.json").read_text())
    assert written["model"] == "fan.onnx" and written["name"] == "fan"
    code, _, err = run_main("spec", "init", "--model", model)
    one_line_error(code, err, r"^certfsm: error: --out .*fan\.spec\.json already exists")


def test_spec_init_refuses_a_model_the_loader_refuses_with_its_one_line_and_writes_nothing(tmp_path):
    model = tmp_path / "fake.onnx"
    model.write_bytes(b"this is not a model")
    code, out, err = run_main("spec", "init", "--model", model, "--out", tmp_path / "s.json")
    one_line_error(code, err, r"^certfsm: error: .*fake\.onnx: is not an ONNX model")
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("outputs", [1, 17])
def test_a_model_whose_outputs_cannot_be_tokens_is_refused(tmp_path, outputs):
    network = Network((AffineLayer(np.ones((outputs, 3)), np.zeros(outputs), "gemm"),), input_name="x")
    model = tmp_path / "m.onnx"
    model.write_bytes(to_onnx(network))
    with pytest.raises(
        ModelError,
        match=rf"m\.onnx: has {outputs} outputs; a controller spec needs one output per token, from 2 to 16 \(each "
        r"token has a 4-bit code\), so re-export the model with one score per token$",
    ):
        starting_spec(model)
