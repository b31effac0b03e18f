"""Long distills as a user meets them: the default checkpoint, the guard, progress off a terminal, --strict.

All on a two-input spec of a few cells with a real ONNX model, so each
whole `certfsm distill` takes a few seconds.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from certfsm import AffineLayer, EngineError, Network, load_spec
from certfsm.fsm import _cell_engines, _cell_workers, _distill, distill_controller
from certfsm.fsm._cell_problem import _Decision
from certfsm.fsm._distill_progress import _Tally
from certfsm.fsm._table import CONSERVATIVE, EXACT, UNDECIDED

from cli_in_process import run_main
from gemm_onnx import onnx_bytes


def boundary_network():
    """KEEP scores 0; A scores 4 (x0 - 0.5) and B the opposite: A wins right of x0 = 0.5, B left of it."""
    hidden = AffineLayer(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([-0.5, 0.5]), "hidden")
    out = AffineLayer(np.array([[0.0, 0.0], [4.0, -4.0], [-4.0, 4.0]]), np.zeros(3), "out")
    return Network((hidden, out), input_name="x")


def write_spec(folder, legal=("KEEP", "A", "B")):
    """tiny.spec.json and tiny.onnx in `folder`: 3 x 2 cells; x0 in [0, 0.3) decides B, [0.7, 1] A, between both."""
    (folder / "tiny.onnx").write_bytes(onnx_bytes(boundary_network()))
    outputs = ("KEEP", "A", "B")
    document = {
        "certfsm_spec": 1,
        "name": "tiny",
        "model": "tiny.onnx",
        "inputs": [
            {"name": "x0", "unit": "", "min": 0, "max": 1, "edges": [0, 0.3, 0.7, 1]},
            {"name": "x1", "unit": "", "min": 0, "max": 1, "edges": [0, 0.5, 1]},
        ],
        "outputs": list(outputs),
        "tokens": {t: k for k, t in enumerate(outputs)},
        "legal_tokens": list(legal),
        "decision": "argmax",
        "conservative_token": "KEEP",
    }
    path = folder / "tiny.spec.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


class Stop(Exception):
    pass


def no_bounds(monkeypatch):
    """Bound propagation closes no cell: every unanimous cell goes to the engines (phase 3)."""
    monkeypatch.setattr(
        _cell_workers, "_bounds_phase", lambda problem, cells, candidates, emit: [int(c) for c in cells]
    )


def stop_after_sampling(done, total, message):
    if not message.startswith("sampling"):
        raise Stop


# ------------------------------------------------------------- the default checkpoint


def test_a_stopped_run_keeps_the_default_checkpoint_and_the_same_call_resumes_and_removes_it(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    out = tmp_path / "c.cfsm"
    with pytest.raises(Stop):
        distill_controller(spec, out=out, report=tmp_path / "r", jobs=1, progress=stop_after_sampling)
    checkpoint = tmp_path / "c.cfsm.checkpoint"
    assert checkpoint.exists() and not out.exists()
    recorded = [json.loads(line) for line in checkpoint.read_text().splitlines()[1:]]
    assert [r["status"] for r in recorded].count("conservative") == 2
    run = distill_controller(spec, out=out, report=tmp_path / "r", jobs=1)
    assert run.distillation.stats["resumed_cells"] == 2 and run.certified
    assert out.exists() and not checkpoint.exists()


def test_a_default_checkpoint_of_another_spec_is_started_afresh_but_a_named_one_is_refused(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    out = tmp_path / "c.cfsm"
    with pytest.raises(Stop):
        distill_controller(spec, out=out, report=tmp_path / "r", jobs=1, progress=stop_after_sampling)
    other = load_spec(write_spec(tmp_path, legal=("KEEP", "A")))
    named = tmp_path / "named.checkpoint"
    named.write_bytes((tmp_path / "c.cfsm.checkpoint").read_bytes())
    with pytest.raises(Exception, match=r"checkpoint belongs to another spec"):
        distill_controller(other, out=out, report=tmp_path / "r", jobs=1, checkpoint=named)
    run = distill_controller(other, out=out, report=tmp_path / "r", jobs=1)
    assert run.distillation.stats["resumed_cells"] == 0 and out.exists()
    assert named.exists() and not (tmp_path / "c.cfsm.checkpoint").exists()


# ------------------------------------------------------------- the guard


def test_by_default_the_work_budget_alone_ends_a_cell(tmp_path, monkeypatch):
    """No wall-clock guard unless asked: verify.check gets a timeout far beyond any budgeted cell."""
    seen = []
    real = _cell_engines.check

    def recording(*args, **kwargs):
        seen.append(kwargs["timeout"])
        return real(*args, **kwargs)

    monkeypatch.setattr(_cell_engines, "check", recording)
    no_bounds(monkeypatch)
    spec = load_spec(write_spec(tmp_path))
    network = boundary_network()
    result = _distill.distill(spec, network, jobs=1)
    assert result.stats["per_cell_timeout"] is None and result.stats["exact"] == 4
    assert len(seen) == 4 and min(seen) >= 24 * 3600


def guard_fires(problem, task):
    if hasattr(task, "cell"):
        return _cell_workers._Outcome(
            "engines",
            [_Decision(task.cell, UNDECIDED, 0, "undecided", reason="guard", wall_clock_guard=True)],
            [],
            1.0,
        )
    return _cell_workers._work(problem, task)


def test_when_the_guard_fires_the_message_names_the_checkpoint_and_how_to_resume(tmp_path, monkeypatch):
    write_spec(tmp_path)
    no_bounds(monkeypatch)
    monkeypatch.setattr(_cell_workers, "_decide_cell", lambda problem, task: guard_fires(problem, task).decisions[0])
    code, out, err = run_main(
        "distill",
        tmp_path / "tiny.spec.json",
        "--out",
        tmp_path / "c.cfsm",
        "--report",
        tmp_path / "r",
        "--jobs",
        "1",
        "--timeout",
        "30",
        "--no-progress",
    )
    checkpoint = tmp_path / "c.cfsm.checkpoint"
    assert code == 2 and "Traceback" not in err, err
    assert re.match(
        r"^certfsm: error: cell \d+: the wall-clock guard of 30 s per cell fired before the work budget "
        r"\(20000 boxes, 8 z3 queries, z3 rlimit 20000000\) was spent, so this cell's verdict would depend on the "
        r"machine's speed; no artifact was written; the \d+ cells decided so far are kept in the checkpoint "
        + re.escape(str(checkpoint))
        + r" \(running the same distill again resumes from it\); give a larger --timeout or leave it out \(the "
        r"work budget alone then ends each cell\), or re-run on a less loaded machine$",
        err.strip(),
    ), err
    assert checkpoint.exists() and not (tmp_path / "c.cfsm").exists()


def test_without_a_checkpoint_the_guard_says_nothing_was_kept(tmp_path, monkeypatch):
    no_bounds(monkeypatch)
    monkeypatch.setattr(_cell_workers, "_decide_cell", lambda problem, task: guard_fires(problem, task).decisions[0])
    spec = load_spec(write_spec(tmp_path))
    with pytest.raises(EngineError, match=r"; nothing was kept \(give checkpoint= to keep the cells decided\); "):
        _distill.distill(spec, boundary_network(), jobs=1, per_cell_timeout=30)


# ------------------------------------------------------------- progress


@pytest.mark.slow
def test_off_a_terminal_progress_is_plain_lines_on_stderr_and_no_progress_silences_them(tmp_path):
    spec = write_spec(tmp_path)
    code, out, err = run_main("distill", spec, "--out", tmp_path / "c.cfsm", "--report", tmp_path / "r", "--jobs", "1")
    assert code == 0, out + err
    lines = err.splitlines()
    cells = [line for line in lines if " cells; " in line]
    pattern = (
        r"^distilling \[\dm\d\ds\] \d+/6 cells; (sampling|bound propagation|engines): \d+ hard cells left, "
        r"\d+\.\d% exact so far"
    )
    assert cells and all(re.match(pattern, line) for line in cells), err
    assert re.match(r"^distilling \[\dm\d\ds\] 6/6 cells; ", cells[-1])
    assert any(re.match(r"^distilling \[\dm\d\ds\] proving the table \(z3\)$", line) for line in lines), err
    code, out, err = run_main(
        "distill", spec, "--out", tmp_path / "c.cfsm", "--report", tmp_path / "r", "--jobs", "1", "--no-progress"
    )
    assert code == 0 and err == ""


def test_the_progress_message_counts_hard_cells_and_estimates_from_the_tasks_done():
    tally = _Tally(total=100, jobs=2)
    assert tally.message() == "sampling: 0 hard cells left, 0.0% exact so far"
    tally.count([_Decision(0, EXACT, 1, "sampling")] * 3 + [_Decision(0, CONSERVATIVE, 0, "sampling")], EXACT)
    tally.chunks, tally.phase = 4, "bound propagation"
    assert tally.message().endswith("75.0% exact so far, estimate after the first chunks")
    tally.bounded(10.0, left_open=6)
    assert tally.message() == (
        "bound propagation: 6 hard cells left, 75.0% exact so far, about 15 s left in bound propagation, "
        "then the hard cells"
    )
    for _ in range(3):
        tally.bounded(10.0, left_open=0)
    tally.engine_done(40.0)
    assert tally.message() == "engines: 5 hard cells left, 75.0% exact so far, about 2 min left"


# ------------------------------------------------------------- --strict


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True])
def test_held_back_cells_are_counted_and_fail_only_under_strict(tmp_path, strict):
    """B removed from legal_tokens: the two cells where the network decides B are held back to KEEP."""
    spec = write_spec(tmp_path, legal=("KEEP", "A"))
    code, out, err = run_main(
        "distill",
        spec,
        "--out",
        tmp_path / "c.cfsm",
        "--report",
        tmp_path / "r",
        "--jobs",
        "1",
        "--no-progress",
        *(["--strict"] if strict else []),
    )
    assert re.search(
        r"^cells: 6; exact 2 \(33\.3%\), conservative 2 \(with a witness\), held back 2, undecided 0; ", out, re.M
    ), out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["shortfalls"] == [
        "2 cells held back to the conservative token, where the network's proved token is illegal or "
        "forbidden by a rule (B in 2)"
    ]
    assert (tmp_path / "c.cfsm").exists() and summary["overall"] == "certified"
    if strict:
        assert code == 1 and summary["succeeded"] is False
        assert re.search(r"^--strict: not the whole network: 2 cells held back .*; exit code 1$", out, re.M), out
    else:
        assert code == 0 and summary["succeeded"] is True and "--strict" not in out


def test_strict_passes_when_every_conservative_cell_has_a_witness(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    run = distill_controller(spec, out=tmp_path / "c.cfsm", report=tmp_path / "r", jobs=1, strict=True)
    assert run.shortfalls == () and run.succeeded


def test_strict_must_be_a_bool(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    with pytest.raises(Exception, match=r"^strict='yes' is not True or False; give strict=True or strict=False$"):
        distill_controller(spec, out=tmp_path / "c.cfsm", report=tmp_path / "r", strict="yes")


# ------------------------------------------------------------- a graph controller, as a user meets it


def graph_network():
    """The boundary network with its output layer reading the input beside the hidden layer: A also gains x1."""
    hidden = AffineLayer(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([-0.5, 0.5]), "hidden")
    out = AffineLayer(
        np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.25, 4.0, -4.0], [0.0, 0.0, -4.0, 4.0]]),
        np.zeros(3),
        "out",
        reads=(0, 1),
    )
    return Network((hidden, out), input_name="x")


def test_a_graph_controller_distils_and_inspect_deep_re_proves_its_artifact(tmp_path):
    from certfsm import load_onnx

    spec = write_spec(tmp_path)
    (tmp_path / "tiny.onnx").write_bytes(onnx_bytes(graph_network()))
    assert not load_onnx(tmp_path / "tiny.onnx").is_chain
    artifact = tmp_path / "g.cfsm"
    code, out, err = run_main("distill", spec, "--out", artifact, "--report", tmp_path / "r", "--jobs", "1")
    assert code == 0, out + err
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["model"]["reads"] == [[0], [0, 1]]
    code, out, err = run_main(
        "inspect", artifact, "--deep", "--model", tmp_path / "tiny.onnx", "--no-progress", "--jobs", "1"
    )
    assert code == 0, out + err
    assert "deep:" in out and "FAILED" not in out
