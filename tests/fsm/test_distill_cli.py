"""`certfsm distill` and `certfsm inspect` as a user meets them: the artifact, the report, exit codes, refusals."""

import hashlib
import json
import re

import numpy as np
import pytest

from certfsm import ArtifactError, load_artifact, write_artifact
from certfsm import load_spec
from certfsm.examples import example_spec_path
from certfsm.fsm._grid import Grid

from cli_in_process import run_main
from cli_run import one_line_error, run_cli
from made_once import made_once_per_run


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    """`certfsm distill --example` through the CLI, run once per test run and read by every worker (tests copy
    what they change): (exit code, stdout, stderr, folder)."""

    def make(folder):
        code, out, err = run_cli(
            "distill",
            "--example",
            "--out",
            folder / "example.cfsm",
            "--report",
            folder / "report",
            "--jobs",
            "2",
            "--no-progress",
            "--map",
            "mem_bw_util,temperature",
        )
        (folder / "run.json").write_text(json.dumps([code, out, err]))

    folder = made_once_per_run(tmp_path_factory, "distill-cli-example", make)
    code, out, err = json.loads((folder / "run.json").read_text())
    return code, out, err, folder


@pytest.mark.slow
def test_example_distils_into_a_certified_artifact_with_zero_mismatches(example_run):
    code, out, err, folder = example_run
    assert code == 0, out + err
    artifact = load_artifact(folder / "example.cfsm")
    assert artifact.is_certified
    summary = json.loads((folder / "report" / "summary.json").read_text())
    assert summary["overall"] == "certified" and summary["artifact"]["sha256"] == artifact.sha256
    assert summary["cross_check"]["samples"] >= 100_000 and summary["cross_check"]["on_exact"] > 0
    assert summary["cross_check"]["mismatches"] == 0 and summary["cross_check"]["onnxruntime_mismatches"] == 0
    fidelity = summary["fidelity"]
    assert fidelity["cells"] == artifact.n_cells >= 4096
    assert fidelity["exact"] == int(artifact.exact.sum()) and fidelity["undecided"] == 0
    assert re.search(rf"exact {fidelity['exact']} \(", out)


@pytest.mark.slow
def test_every_certificate_file_is_in_the_report_with_its_hash(example_run):
    _, _, _, folder = example_run
    artifact = load_artifact(folder / "example.cfsm")
    files = [entry for entry in artifact.certificate if entry.smt2]
    assert {e.property for e in files} >= {
        "table-tokens",
        "table-masks",
        "table-codes",
        "machine-output-legal",
        "machine-invariant-inductive",
        "machine-switch-cooldown",
    }
    for entry in files:
        data = (folder / "report" / entry.smt2).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry.smt2_sha256
        assert b"(set-info :status unsat)" in data
    machine = {e.property[len("machine-") :] for e in artifact.certificate if e.property.startswith("machine-")}
    enumerated = {
        e.property[len("enumeration-") :] for e in artifact.certificate if e.property.startswith("enumeration-")
    }
    assert enumerated and enumerated <= machine


@pytest.mark.slow
def test_the_artifact_table_is_the_network_on_exact_cells(example_run):
    _, _, _, folder = example_run
    artifact = load_artifact(folder / "example.cfsm")
    spec = load_spec(example_spec_path("coadapt"))
    from certfsm import gated_decide, load_onnx

    network = load_onnx(spec.model_path)
    grid = Grid.from_spec(spec)
    rng = np.random.default_rng(7)
    x = rng.uniform(grid.lower, grid.upper, size=(20_000, grid.n_inputs))
    cells = grid.cell_of(x)
    decisions = gated_decide(network.evaluate(x), spec.decision, spec.margin, spec.conservative_index)
    exact = artifact.exact.reshape(-1)[cells]
    assert exact.any()
    assert np.array_equal(artifact.proposal.reshape(-1)[cells][exact], decisions[exact])


@pytest.mark.slow
def test_report_has_markdown_cells_and_a_decision_map(example_run):
    _, _, _, folder = example_run
    report = folder / "report"
    text = (report / "report.md").read_text()
    assert "## Fidelity" in text and "## Sampled cross-check" in text and "**0** times" in text
    picture = report / "decision-map-mem_bw_util-temperature.png"
    assert picture.read_bytes().startswith(b"\x89PNG") and f"]({picture.name})" in text
    lines = (report / "cells.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == load_artifact(folder / "example.cfsm").n_cells
    conservative = [r for r in records if r["status"] == "conservative"]
    assert conservative and all(len(r["witness"]) == 2 or "reason" in r for r in conservative)


@pytest.mark.slow
def test_inspect_passes_the_artifact_and_its_report(example_run):
    _, _, _, folder = example_run
    code, out, err = run_cli("inspect", folder / "example.cfsm", "--report", folder / "report")
    assert code == 0, out + err
    assert re.search(r"^  ok +smt2 files: (\d+) of \1 \.smt2 and proof certificate files", out, re.M)
    assert "the artifact is certified" in out


@pytest.mark.slow
def test_recheck_reruns_the_distill_report_with_stock_z3(example_run):
    _, _, _, folder = example_run
    code, out, err = run_cli("recheck", folder / "report", "--timeout", "120")
    assert code == 0, out + err
    assert re.search(r"^(\d+) of \1 files confirmed by z3, 0 unconfirmed, 0 mismatched, 0 invalid$", out, re.M)


def tampered(folder, tmp_path, name, change):
    """A copy of the example artifact with `change(document)` applied: written with its new hash by the one writer
    when change says so, else in canonical form under the old hash."""
    document = json.loads((folder / "example.cfsm").read_bytes())
    rehash = change(document)
    path = tmp_path / name
    if rehash:
        write_artifact(path, document["payload"])
    else:
        path.write_bytes(json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode())
    return path


def flip_table_byte(document):
    status = document["payload"]["table"]["status"]
    document["payload"]["table"]["status"] = ("c" if status[0] == "e" else "e") + status[1:]
    return False


def flip_verdict(document):
    document["payload"]["certificate"][1]["verdict"] = "unknown"
    return True


def swap_model_hash(document):
    document["payload"]["model_sha256"] = "0" * 64
    return False


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, failing", [(flip_table_byte, "sha256"), (flip_verdict, "certificate"), (swap_model_hash, "sha256")]
)
def test_inspect_fails_a_tampered_artifact_and_the_loader_refuses_it(example_run, tmp_path, change, failing):
    _, _, _, folder = example_run
    path = tampered(folder, tmp_path, "tampered.cfsm", change)
    code, out, err = run_cli("inspect", path)
    assert code == 1, out + err
    assert re.search(rf"^  FAILED  {failing}: ", out, re.M)
    with pytest.raises(ArtifactError, match=rf"^{re.escape(str(path))}: "):
        load_artifact(path)


@pytest.mark.slow
def test_an_smt2_file_changed_after_the_fact_fails_inspect(example_run, tmp_path):
    _, _, _, folder = example_run
    import shutil

    report = tmp_path / "report"
    shutil.copytree(folder / "report", report)
    with open(report / "table-tokens.smt2", "a") as handle:
        handle.write("; edited\n")
    code, out, err = run_cli("inspect", folder / "example.cfsm", "--report", report)
    assert code == 1 and re.search(r"^  FAILED  smt2 files: ", out, re.M), out + err


@pytest.mark.slow
def test_unsafe_example_is_held_back_where_it_breaks_a_rule(tmp_path):
    code, out, err = run_cli(
        "distill",
        "--example",
        "--example-name",
        "coadapt_unsafe",
        "--out",
        tmp_path / "unsafe.cfsm",
        "--report",
        tmp_path / "report",
        "--jobs",
        "2",
        "--no-progress",
    )
    assert code == 0, out + err
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    held = summary["fidelity"]["held_back_by_rules"]
    assert held > 0 and summary["fidelity"]["held_back_by_token"] == {"INT4": held}
    assert re.search(rf"^warning: the network breaks the legality rules in {held} cells \(INT4 in {held}\)", out, re.M)
    artifact = load_artifact(tmp_path / "unsafe.cfsm")
    spec = load_spec(example_spec_path("coadapt_unsafe"))
    hot = Grid.from_spec(spec).edges[3][:-1] >= 85
    assert not np.any(artifact.proposal[:, :, :, hot, :] == spec.output_index("INT4"))


# ---------------------------------------------------------------- bad input


def test_out_must_be_a_cfsm_file(tmp_path):
    code, out, err = run_main(
        "distill", "--example", "--out", tmp_path / "x.json", "--report", tmp_path / "r", "--no-progress"
    )
    assert one_line_error(
        code,
        err,
        r"^certfsm: error: --out .*x\.json: an artifact file name ends in \.cfsm; "
        r"give e\.g\. --out x\.cfsm$",
    ), err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_bad_map_names_the_inputs(tmp_path):
    code, out, err = run_main(
        "distill",
        "--example",
        "--out",
        tmp_path / "x.cfsm",
        "--report",
        tmp_path / "r",
        "--map",
        "temperature,nope",
        "--no-progress",
    )
    assert code == 2 and "Traceback" not in err and "nope" in err, err
    assert not (tmp_path / "x.cfsm").exists() and not (tmp_path / "r").exists()


def test_a_file_that_is_no_checkpoint_is_named_by_the_flag_that_gave_it(tmp_path):
    """distill_controller says checkpoint=; certfsm distill says --checkpoint, before any cell is decided."""
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    code, out, err = run_main(
        "distill",
        "--example",
        "--out",
        tmp_path / "x.cfsm",
        "--report",
        tmp_path / "r",
        "--checkpoint",
        notes,
        "--jobs",
        "1",
        "--no-progress",
    )
    assert one_line_error(
        code,
        err,
        rf"^certfsm: error: {re.escape(str(notes))}: not a certfsm distill checkpoint "
        r"\(its first line is not a checkpoint header\); give another --checkpoint path "
        r"or delete the file$",
    ), err
    assert not (tmp_path / "x.cfsm").exists() and not (tmp_path / "r").exists()


def test_a_missing_out_is_a_usage_error(tmp_path):
    code, out, err = run_main("distill", "--example", "--report", tmp_path / "r")
    assert code == 2 and "--out" in err and "Traceback" not in err


def test_inspect_of_a_missing_file_is_bad_input_in_one_line(tmp_path):
    code, out, err = run_main("inspect", tmp_path / "absent.cfsm")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and re.match(r"^certfsm: error: .*absent\.cfsm: no such file", lines[0]), err
    assert "Traceback" not in err and out == ""


@pytest.mark.slow
def test_a_rerun_with_a_checkpoint_keeps_the_witnesses_and_rebuilds_the_same_table(tmp_path):
    def run(name):
        code, out, err = run_cli(
            "distill",
            "--example",
            "--out",
            tmp_path / f"{name}.cfsm",
            "--report",
            tmp_path / name,
            "--checkpoint",
            tmp_path / "run.ckpt",
            "--jobs",
            "1",
            "--no-progress",
        )
        assert code == 0, out + err
        return json.loads((tmp_path / name / "summary.json").read_text()), load_artifact(tmp_path / f"{name}.cfsm")

    first, first_artifact = run("first")
    second, second_artifact = run("second")
    assert first["run"]["resumed_cells"] == 0
    conservative = first["fidelity"]["cells"] - first["fidelity"]["exact"]
    assert second["run"]["resumed_cells"] == conservative > 0
    assert second["run"]["reproved_checkpoint_cells"] == first["fidelity"]["exact"]
    assert np.array_equal(first_artifact.proposal, second_artifact.proposal)
    assert np.array_equal(first_artifact.exact, second_artifact.exact)
    # The exact cells of the checkpoint are proved again, so the second run's certificate still covers them all.
    assert second["cell_certificate"]["certified_cells"] == second["cell_certificate"]["exact_cells"] > 0
    assert second["cell_certificate"]["sha256"] == first["cell_certificate"]["sha256"]


def old_outputs(tmp_path):
    """An artifact and a report from an earlier run, which a failed run must leave exactly as they are."""
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "summary.json").write_text("old report")
    (tmp_path / "old.cfsm").write_text("old artifact")
    return tmp_path / "old.cfsm", tmp_path / "report"


def assert_untouched(tmp_path, artifact, report):
    assert artifact.read_text() == "old artifact" and (report / "summary.json").read_text() == "old report"
    assert sorted(p.name for p in report.iterdir()) == ["summary.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "changes, pattern",
    [
        ({"decision": "softmax"}, r"^certfsm: error: .*spec\.json: decision"),
        ({"model": "missing.onnx"}, r"^certfsm: error: .*missing\.onnx"),
    ],
)
def test_bad_spec_is_one_line_exit_2_and_leaves_the_old_artifact_and_report(
    tmp_path, changes, pattern, example_spec_with
):
    artifact, report = old_outputs(tmp_path)
    code, out, err = run_main(
        "distill", example_spec_with(**changes), "--out", artifact, "--report", report, "--no-progress"
    )
    assert one_line_error(code, err, pattern), err
    assert_untouched(tmp_path, artifact, report)


def test_malformed_onnx_is_one_line_exit_2_and_leaves_the_old_artifact_and_report(tmp_path, example_spec_with):
    artifact, report = old_outputs(tmp_path)
    model = tmp_path / "broken.onnx"
    model.write_bytes(b"\x08\x07this is not protobuf")
    code, out, err = run_main(
        "distill", example_spec_with(model=str(model)), "--out", artifact, "--report", report, "--no-progress"
    )
    assert one_line_error(code, err, r"^certfsm: error: .*broken\.onnx"), err
    assert_untouched(tmp_path, artifact, report)


def test_too_few_cross_check_samples_are_refused(tmp_path):
    code, out, err = run_main(
        "distill",
        "--example",
        "--out",
        tmp_path / "x.cfsm",
        "--report",
        tmp_path / "r",
        "--samples",
        "99999",
        "--no-progress",
    )
    assert one_line_error(
        code,
        err,
        r"^certfsm: error: --samples 99999: the cross-check needs at least 100000 random "
        r"inputs; give --samples 100000 or more$",
    ), err
    assert not (tmp_path / "x.cfsm").exists() and not (tmp_path / "r").exists()
