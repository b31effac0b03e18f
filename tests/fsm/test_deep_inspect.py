"""Issue 9 part 3: `certfsm inspect --deep` re-proves an artifact from its own content and the model.

The rehashed edits are the ones tests/core/test_artifact_trust.py applies
to the loader (read from that file, so one list of attacks has two
judges): every one of them must be refused by `inspect --deep`, those
the loader lets through by the deep re-proof itself.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certfsm import ModelError, ReportError, gated_decide, load_artifact
from certfsm.cli import main
from certfsm.examples import example_spec_path
from certfsm.fsm import deep_inspect, model_for_artifact
from certfsm.fsm._deep_inspect import DeepResult
from certfsm.fsm._deep_cells import exact_decision

MODEL = example_spec_path("coadapt").parent / "coadapt.onnx"


def _attacks():
    """The rehashed edits of tests/core/test_artifact_trust.py: (REFUSED edits, LOADS edits, rehash)."""
    path = Path(__file__).parents[1] / "core" / "test_artifact_trust.py"
    spec = importlib.util.spec_from_file_location("artifact_trust_attacks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [edit for edit, _, _ in module.REFUSED], list(module.LOADS), module.rehash


REFUSED_BY_LOADER, LOADED_BY_LOADER, rehash = _attacks()


@pytest.fixture(scope="module")
def distilled(distilled_example):
    """(artifact path, report folder, payload) of the example distilled once per session."""
    _, run, path = distilled_example
    return path, run.report_path, json.loads(path.read_bytes())["payload"]


def deep_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["inspect", *map(str, args), "--deep", "--no-progress", "--jobs", "1"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------- fast


@pytest.mark.parametrize("rule", ["argmax", "argmin"])
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_the_exact_decision_is_the_gated_decision_on_exact_scores(rule, margin):
    rng = np.random.default_rng(7)
    scores = rng.integers(-3, 4, size=(400, 4)) / 2.0  # many ties and margins met exactly
    expected = gated_decide(scores, rule, margin, 2)
    found = [exact_decision([Fraction(v) for v in row], rule, margin, 2) for row in scores]
    assert found == expected.tolist()


@pytest.mark.slow
def test_the_distilled_example_re_proves_with_its_report(distilled):
    path, report, payload = distilled
    result = deep_inspect(path, MODEL, report=report, jobs=1)
    assert result.is_ok, result.failures
    assert sum(result.exact_proved.values()) == payload["table"]["status"].count("e") > 0
    assert result.conservative == payload["table"]["status"].count("c") > 0
    assert result.witnesses.validated + result.witnesses.without_witness == result.conservative
    assert [q.property for q in result.queries] == [e["property"] for e in payload["certificate"] if e["smt2"]]
    assert all(q.is_ok and q.report == "same" for q in result.queries)
    assert not result.enumeration and result.lines()[-1].startswith("deep: ok: everything re-proved in ")


def test_another_model_is_bad_input_naming_the_file(distilled, tmp_path, capsys):
    other = tmp_path / "other.onnx"
    other.write_bytes(MODEL.read_bytes() + b"\0")
    code, out, err = deep_cli(capsys, distilled[0], "--model", other)
    assert (code, out) == (2, "")
    assert re.fullmatch(
        rf"certfsm: error: {re.escape(str(other))}: the model's sha256 is [0-9a-f]{{16}}\.\.\. but "
        rf"{re.escape(str(distilled[0]))} was distilled from a model with sha256 [0-9a-f]{{16}}\.\.\.; "
        r"give that model with --model \(or the artifact was edited\)\n",
        err,
    )
    with pytest.raises(ModelError):
        deep_inspect(distilled[0], other)


def test_the_library_refuses_a_bad_model_or_report_in_its_parameters(distilled, tmp_path):
    """deep_inspect and model_for_artifact name their parameters (model_path=, report=), never the CLI's flags."""
    path = distilled[0]
    other = tmp_path / "other.onnx"
    other.write_bytes(MODEL.read_bytes() + b"\0")
    refusals = [
        (
            lambda: model_for_artifact(other, load_artifact(path)),
            ModelError,
            rf"^{re.escape(str(other))}: the model's sha256 is [0-9a-f]{{16}}\.\.\. but .*; give that model with "
            r"model_path= \(or the artifact was edited\)$",
        ),
        (
            lambda: model_for_artifact(tmp_path / "missing.onnx", load_artifact(path)),
            ModelError,
            rf"^{re.escape(str(tmp_path / 'missing.onnx'))}: cannot read the model \(No such file or directory\); give "
            rf"the ONNX model {re.escape(str(path))} was distilled from with model_path=$",
        ),
        (
            lambda: deep_inspect(path, MODEL, report=tmp_path / "nowhere", jobs=1),
            ReportError,
            rf"^{re.escape(str(tmp_path / 'nowhere'))}: no such report folder; give the folder certfsm distill wrote "
            r"with report=$",
        ),
    ]
    for call, error_type, pattern in refusals:
        with pytest.raises(error_type, match=pattern) as error:
            call()
        assert "--" not in str(error.value)


def test_a_deep_result_without_a_report_says_which_parameter_brings_the_witnesses():
    result = DeepResult(Path("a.cfsm"), MODEL, "0" * 64, 4, Counter({"bounds": 2}), (), None, 2, (), ())
    line = next(line for line in result.lines() if line.startswith("deep: conservative cells: "))
    assert line.endswith(
        "witnesses not re-validated (they live in the report's cells.jsonl: give the report folder with report=)"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ((), r"--deep re-proves the artifact against its model; give --model M\.onnx"),
        (("--model", "missing.onnx"), r"missing\.onnx: cannot read the model \(No such file or directory\)"),
    ],
)
def test_bad_deep_arguments_are_one_line_and_exit_2(distilled, capsys, args, message):
    code, out, err = deep_cli(capsys, distilled[0], *args)
    assert code == 2 and out == "" and re.match(rf"^certfsm: error: {message}", err) and err.count("\n") == 1


# ---------------------------------------------------------------- slow: the command, attacks


@pytest.mark.slow
def test_inspect_deep_on_the_example_prints_what_it_re_proved_and_exits_0(distilled, capsys):
    path, report, payload = distilled
    code, out, err = deep_cli(capsys, path, "--model", MODEL, "--report", report)
    assert code == 0, out + err
    exact, conservative = payload["table"]["status"].count("e"), payload["table"]["status"].count("c")
    assert re.search(rf"^deep: exact cells re-proved against the model: {exact} of {exact} \(", out, re.MULTILINE)
    assert re.search(
        rf"^deep: conservative cells: {conservative}; witness pairs re-validated exactly, in float64 "
        r"and in onnxruntime: \d+ of \d+; ",
        out,
        re.MULTILINE,
    )
    assert re.search(
        r"^deep: SMT-LIB queries regenerated from the artifact: 11, proved by z3: 11, equal to the "
        r"certificate and the report's files: 11; enumeration agrees: yes",
        out,
        re.MULTILINE,
    )
    assert re.search(r"^deep: ok: everything re-proved in \d+\.\d s$", out, re.MULTILINE)


# What refuses each edit the loader lets through: the first failure `inspect --deep` prints.
CELL_NOT_REPROVED = r"exact cell \d+ \(compute_util in .*\), token {}: not re-proved"
QUERY_DIFFERS = r"{}\.smt2: the query regenerated from the artifact hashes to [0-9a-f]{{16}}\.\.\. but the certificate"
DEEP_CATCHES = {
    "exact_token_swapped_for_another_allowed": CELL_NOT_REPROVED.format("FUSE_CONV"),
    "conservative_cell_turned_exact": CELL_NOT_REPROVED.format("KEEP"),
    "conservative_cell_turned_exact_with_a_token": CELL_NOT_REPROVED.format("FUSE_CONV"),
    "confirm_cooldown_in_both": QUERY_DIFFERS.format("machine-invariant-initial"),
    "every_legal_token_overridable_in_both": QUERY_DIFFERS.format("machine-invariant-initial"),
    "rule_box_moved_with_masks_recomputed": QUERY_DIFFERS.format("table-tokens"),
    "rule_box_deleted_with_masks_recomputed": QUERY_DIFFERS.format("table-tokens"),
    "gate_margin_zero": CELL_NOT_REPROVED.format(r"\w+"),
}


def test_every_edit_the_loader_lets_through_says_what_refuses_it():
    assert sorted([*DEEP_CATCHES, "model_hash_swapped"]) == sorted(edit.__name__ for edit in LOADED_BY_LOADER)


@pytest.mark.slow
@pytest.mark.parametrize("edit", REFUSED_BY_LOADER + LOADED_BY_LOADER, ids=lambda edit: edit.__name__)
def test_every_rehashed_edit_is_refused_by_inspect_deep(distilled, tmp_path, capsys, edit):
    """0 accepted: the loader's refusals stop inspect before the re-proof (exit 1), a swapped model hash is bad
    input naming the model (exit 2), and every other edit fails the re-proof where DEEP_CATCHES says (exit 1)."""
    path, _, original = distilled
    payload = copy.deepcopy(original)
    edit(payload)
    code, out, err = deep_cli(capsys, rehash(tmp_path, payload), "--model", MODEL)
    if edit.__name__ == "model_hash_swapped":
        assert (
            code == 2
            and out == ""
            and re.match(
                rf"^certfsm: error: {re.escape(str(MODEL))}: the model's sha256 "
                r"is [0-9a-f]{16}\.\.\. but .*edited\.cfsm was distilled from a "
                r"model with sha256 ",
                err,
            )
        ), err
    elif edit in LOADED_BY_LOADER:
        assert code == 1 and re.search(r"^deep: FAILED: \d+ item\(s\) did not re-prove", out, re.MULTILINE), out + err
        first = next(line for line in out.splitlines() if line.startswith("  FAILED "))
        assert re.match(rf"  FAILED {DEEP_CATCHES[edit.__name__]}", first), first
    else:
        assert code == 1 and "deep: not run: the artifact fails the checks above" in out, out + err


@pytest.mark.slow
def test_a_swapped_exact_token_is_named_by_cell_bounds_and_token(distilled, tmp_path):
    _, _, original = distilled
    payload = copy.deepcopy(original)
    table = payload["table"]
    fuse = 1
    cell = next(
        k
        for k, (t, s, m) in enumerate(zip(table["proposal"], table["status"], table["allowed"]))
        if s == "e" and t != fuse and m >> fuse & 1
    )
    table["proposal"][cell] = fuse
    result = deep_inspect(rehash(tmp_path, payload), MODEL, jobs=1)
    assert not result.is_ok and [f.cell for f in result.cell_failures] == [cell]
    failure = result.cell_failures[0]
    assert failure.token == "FUSE_CONV" and failure.bounds.startswith("compute_util in [")
    assert re.fullmatch(
        rf"exact cell {cell} \(compute_util in .*\), token FUSE_CONV: not re-proved: [\w+]+ reaches "
        r"the closure of another decision at \(.*\), validated exactly, in float64 and in onnxruntime; "
        r"the network decides (?!FUSE_CONV)\w+ there",
        result.failures[0],
    )


@pytest.mark.slow
def test_an_edited_report_file_and_a_forged_witness_are_named(distilled, tmp_path):
    import shutil

    path, report, original = distilled
    copied = tmp_path / "report"
    shutil.copytree(report, copied)
    machine = copied / "machine-switch-cooldown.smt2"
    machine.write_text(machine.read_text().replace("(check-sat)", "(assert true)\n(check-sat)"))
    records = [json.loads(line) for line in (copied / "cells.jsonl").read_text().splitlines()]
    forged = next(r for r in records if "witness" in r)
    forged["witness"][1] = forged["witness"][0]
    (copied / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    result = deep_inspect(path, MODEL, report=copied, jobs=1)
    assert not result.is_ok
    assert [f.cell for f in result.witnesses.failures] == [forged["cell"]]
    assert "the witness pair does not hold" in result.witnesses.failures[0].reason
    bad = [q for q in result.queries if not q.is_ok]
    assert [q.file for q in bad] == ["machine-switch-cooldown.smt2"]
    assert re.fullmatch(
        r"machine-switch-cooldown\.smt2: the report's file .*machine-switch-cooldown\.smt2 differs "
        r"from the query regenerated from the artifact at byte \d+ \(line \d+\)",
        bad[0].describe(),
    )


@pytest.mark.slow
def test_a_report_of_another_table_is_refused_record_by_record(distilled_example):
    """cells.jsonl is read, never believed: a record whose status or token differs from the table fails its cell."""
    from dataclasses import replace

    from certfsm import load_onnx
    from certfsm.fsm._cell_problem import _problem
    from certfsm.fsm._deep_cells import revalidate_witnesses

    spec, run, _ = distilled_example
    table = run.distillation.table
    problem = _problem(spec, load_onnx(spec.model_path))
    assert revalidate_witnesses(problem, table, run.report_path).failures == ()
    cell = int(np.flatnonzero(table.status == 1)[0])
    proposal = table.proposal.copy()
    proposal[cell] = (proposal[cell] + 1) % 4
    checked = revalidate_witnesses(problem, replace(table, proposal=proposal), run.report_path)
    assert [f.cell for f in checked.failures] == [cell]
    assert re.fullmatch(
        rf".*cells\.jsonl line {cell + 1} says exact \w+, but the artifact holds exact \w+: the report "
        r"is not this artifact's",
        checked.failures[0].reason,
    )
