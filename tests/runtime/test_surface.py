"""What a person sees of the runtime: short reprs, `help(Controller)`, reasons by name, names in the exported
log, counters made from the machine, and package docstrings that describe exactly what the packages export."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import pydoc
import re
from pathlib import Path

import pytest
from cli_in_process import run_main

from certfsm import UsageError, load_artifact, runtime
from certfsm.machine import Machine, Reason
from certfsm.runtime import Controller, RuntimeCounters, RuntimeInputWarning
from certfsm.runtime._controller import Decision

ROOT = Path(__file__).resolve().parents[2]
READING = [62.0, 40.0, 12.5, 71.0, 9.0]
GOOD = {"latency_ms": 4.0}


@pytest.fixture(scope="module")
def artifact_path(distilled_example):
    return distilled_example[2]


@pytest.fixture
def controller(artifact_path):
    return runtime.load(artifact_path)


# ---------------------------------------------------------------- reprs


def test_the_machine_repr_is_one_short_line_with_inputs_cells_tokens_and_hash(controller):
    machine = controller.machine
    text = repr(machine)
    assert len(text) < 300 and "\n" not in text
    assert text.startswith(f"Machine(5 inputs {', '.join(machine.names)}; 7200 cells (8x9x4x5x5), ")
    assert f"{sum(machine.exact)} exact" in text and "KEEP (conservative)" in text
    assert all(token in text for token in machine.tokens) and f"sha256 {machine.artifact_sha256[:12]}..." in text


def test_a_machine_of_many_inputs_and_tokens_keeps_its_repr_short(controller):
    machine = dataclasses.replace(
        controller.machine,
        names=tuple(f"input_{k}" for k in range(40)),
        tokens=tuple(f"TOKEN_{k}" for k in range(5)) + tuple(f"T{k}" for k in range(30)),
        artifact_sha256="",
    )
    text = repr(machine)
    assert len(text) < 300 and "input_0, " in text and "..., input_39 (40)" in text and text.endswith("no artifact)")


def test_equality_stays_what_it_was(controller, artifact_path):
    machine, other = controller.machine, runtime.load_machine(artifact_path)
    assert Machine.__eq__ is object.__eq__ and machine == machine and machine != other
    decision = controller.step(READING, GOOD, 1.0)
    assert decision == tuple(decision) and Decision.__eq__ is tuple.__eq__
    assert decision == ("KEEP", 0, 0, Reason.HOLD_CONFIRMING, decision.cell, decision.state, True, 1.0)


def test_the_controller_decision_and_artifact_reprs_are_short_and_say_what_matters(controller, artifact_path):
    sha = controller.machine.artifact_sha256[:12]
    text = repr(controller)
    assert len(text) < 250 and text.startswith(f"Controller(sha256 {sha}..., 5 inputs, 7200 cells; token KEEP, ")
    assert "SlaMonitor(inference; cycle 0, ok)" in text
    controller.attach_counters(RuntimeCounters.for_machine(controller.machine))
    assert repr(controller).endswith("; counters)")
    with pytest.warns(RuntimeInputWarning, match="^SLA metric 'latency_ms'"):
        for _ in range(6):
            decision = controller.step(READING, None, 2.5)
    text = repr(decision)
    assert len(text) < 200
    assert re.fullmatch(
        r"Decision\(token='KEEP', code=0, reason=FALLBACK_SLA, cell=\d+, sla_ok=False, "
        r"state=\(current 0, candidate -1, count 0, cooldown \d+\), time=2\.5\)",
        text,
    )
    artifact = load_artifact(artifact_path)
    text = repr(artifact)
    assert len(text) < 250 and text.startswith("Artifact(coadapt from example.cfsm: 5 inputs, 7200 cells (8x9x4x5x5), ")
    assert f"sha256 {sha}..." in text


# ---------------------------------------------------------------- help(Controller)


def test_help_shows_step_with_its_signature_and_docstring():
    text = pydoc.plain(pydoc.render_doc(Controller))
    assert re.search(r"\n \|  step\(self, reading: 'Reading', metrics: 'Metrics \| None' = None, now: ", text)
    assert "Decide one cycle from real-valued readings" in text
    assert "RuntimeInputWarning" in inspect.getdoc(Controller.step)
    assert list(inspect.signature(Controller.step).parameters) == ["self", "reading", "metrics", "now"]


def test_the_class_method_decides_as_the_instance_fast_path_does(artifact_path):
    fast, through_class = runtime.load(artifact_path), runtime.load(artifact_path)
    readings = [[float(k % 100), 40.0, 12.5, 20.0 + k % 90, float(k % 64)] for k in range(200)]
    assert [fast.step(r, GOOD, 0.0) for r in readings] == [
        Controller.step(through_class, r, GOOD, 0.0) for r in readings
    ]
    assert "step" in vars(fast) and vars(fast)["step"] is not Controller.step  # the instance's own function


# ---------------------------------------------------------------- Reason


def test_a_reason_prints_its_name_and_stays_its_code(capsys):
    reason = Reason.FALLBACK_SLA
    print(reason)
    assert capsys.readouterr().out == "FALLBACK_SLA\n"
    assert str(reason) == repr(reason) == f"{reason!s}" == "FALLBACK_SLA" and repr([reason]) == "[FALLBACK_SLA]"
    assert isinstance(reason, int) and reason == 7 and int(reason) == 7 and Reason(7) is reason and reason > 6
    # format() keeps the code: the machine proofs, the Verilog and the C write reasons into their text this way
    assert f"{reason}" == f"{reason:d}" == "7" and f"{reason:>3}" == "  7" and json.dumps({"r": reason}) == '{"r": 7}'
    assert "%d" % reason == "7" and hash(reason) == hash(7)


# ---------------------------------------------------------------- counters


def test_counters_take_their_tokens_from_the_machine(controller):
    counters = RuntimeCounters.for_machine(controller.machine)
    controller.attach_counters(counters)
    with pytest.warns(RuntimeInputWarning, match="^SLA metric 'latency_ms'"):
        for _ in range(6):
            controller.step(READING, None)
    snapshot = counters.snapshot()
    assert snapshot.tokens == controller.machine.tokens
    assert snapshot.token_counts() == {"KEEP": 6, "FUSE_CONV": 0, "INT4": 0, "OFFLOAD_CPU": 0, "SPARSE_2_4": 0}
    assert snapshot.reason_counts()["FALLBACK_SLA"] == 4 and snapshot.steps == 6
    assert RuntimeCounters(controller.machine.tokens).snapshot().tokens == snapshot.tokens  # the old signature


# ---------------------------------------------------------------- audit export


@pytest.fixture
def logged_run(artifact_path, tmp_path):
    """A short audit log of the example: table decisions, envelope and SLA fallbacks, an override."""
    controller = runtime.load(artifact_path)
    runtime.open_audit(controller, tmp_path / "run.log")
    for k in range(30):
        reading = [float(3 * k % 100), 40.0, 12.5, 20.0 + 3 * k % 90, float(k % 64)]
        if k == 10:
            reading[3] = float("nan")
        if k == 12:
            controller.override("OFFLOAD_CPU", cycles=2)
        controller.step(reading, {"latency_ms": 30.0 if 15 <= k < 20 else 4.0}, float(k))
    controller._audit.close()
    return tmp_path / "run.log"


def exported(log, **options) -> list[dict]:
    out = log.parent / "export.jsonl"
    assert runtime.export_jsonl(log, out, **options).ok
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_export_writes_token_and_reason_names_beside_their_numbers(logged_run, artifact_path):
    tokens = load_artifact(artifact_path).token_names
    lines = exported(logged_run, artifact=artifact_path)
    steps = [line for line in lines if line["kind"] == "step"]
    assert len(steps) == 30
    for line in steps:
        assert isinstance(line["token"], int) and isinstance(line["reason"], int) and isinstance(line["code"], int)
        assert line["token_name"] == tokens[line["token"]] and line["reason_name"] == Reason(line["reason"]).name
    assert {"FALLBACK_ENVELOPE", "FALLBACK_SLA"} <= {line["reason_name"] for line in steps}
    (override,) = [line for line in lines if line["kind"] == "override"]
    assert override["token"] == tokens.index("OFFLOAD_CPU") and override["token_name"] == "OFFLOAD_CPU"


def test_export_without_the_artifact_names_reasons_and_leaves_token_names_null(logged_run):
    steps = [line for line in exported(logged_run) if line["kind"] == "step"]
    assert {line["token_name"] for line in steps} == {None}
    assert all(line["reason_name"] == Reason(line["reason"]).name for line in steps)


def test_export_refuses_an_artifact_the_log_did_not_run(logged_run, coarse_example):
    with pytest.raises(UsageError, match=r"^artifact='.*variant\.cfsm': artifact [0-9a-f]{12} is not the one the log"):
        runtime.export_jsonl(logged_run, logged_run.parent / "out.jsonl", artifact=coarse_example)


def test_the_cli_exports_names_with_artifact(logged_run, artifact_path):
    code, out, err = run_main("audit", "export", logged_run, "--artifact", artifact_path)
    steps = [json.loads(line) for line in out.splitlines() if '"kind": "step"' in line]
    assert code == 0, err
    assert steps and all(line["token_name"] and line["reason_name"] for line in steps)


# ---------------------------------------------------------------- package docstrings


def documented_names(package: str) -> set[str]:
    """The names the list part of a package docstring writes in backticks (before its "Homes" paragraph), by the
    leading identifier of each (`Controller.step` -> Controller)."""
    docstring = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text())) or ""
    public = docstring.split("\nHomes")[0]
    return {re.match(r"[A-Za-z_]\w*", item).group() for item in re.findall(r"`([A-Za-z_][^`]*)`", public)}


def defined_names(package: str) -> set[str]:
    """Every class and function defined at the top level of the package's modules."""
    names = set()
    for path in (ROOT / package).glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
    return names


@pytest.mark.parametrize("package, module", [("runtime", runtime), ("sla", pytest.importorskip("certfsm.sla"))])
def test_each_package_docstring_describes_exactly_what_it_exports(package, module):
    exported_names = set(module.__all__)
    described = documented_names(package)
    assert exported_names <= described, f"exported but not described: {sorted(exported_names - described)}"
    stray = (described & defined_names(package)) - exported_names
    assert not stray, f"described as public but not exported: {sorted(stray)}"
