"""Issue 9 part 4: the same spec and model give the same artifact bytes, however loaded the machine.

The payload holds no run facts (times, dates, hosts, worker counts): they
are in the report. Whether a cell is exact depends on work counts, not
seconds; the wall-clock guard, when it fires, stops the run instead of
writing a different table.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from contextlib import contextmanager

import pytest

from certfsm import EngineError, VerdictRecord, artifact_payload
from certfsm import load_spec
from certfsm.examples import example_spec_path
from certfsm.fsm import distill, distill_controller

RUN_FACT_KEYS = re.compile(r"seconds|time|date|host|jobs|workers|duration|elapsed|started|finished", re.IGNORECASE)


def keys_of(value, path="payload"):
    """Every (JSON path, key) of the objects inside `value`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield path, key
            yield from keys_of(item, f"{path}.{key}")
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from keys_of(item, f"{path}[{k}]")


def test_a_record_enters_the_certificate_without_its_run_facts():
    fast = VerdictRecord(
        "proved", "z3", 0.01, "", property="table-tokens", smt2="table-tokens.smt2", smt2_sha256="0" * 64
    )
    slow = VerdictRecord(
        "proved",
        "z3",
        42.0,
        "took long on a loaded machine",
        property="table-tokens",
        smt2="table-tokens.smt2",
        smt2_sha256="0" * 64,
    )
    assert fast.certificate_entry() == slow.certificate_entry()
    assert sorted(fast.certificate_entry()) == ["engine", "property", "required", "smt2", "smt2_sha256", "verdict"]
    assert slow.report_entry()["seconds"] == 42.0 and slow.report_entry()["reason"].startswith("took long")
    payload = artifact_payload(
        spec={},
        model_sha256="0" * 64,
        edges=[[0.0, 1.0]],
        frac_bits=[None],
        proposal=[0],
        exact=[True],
        allowed=[1],
        conservative=0,
        confirm_cycles=1,
        cooldown_cycles=0,
        overridable=[],
        codes=[0],
        certificate=[slow],
        created_by="certfsm test",
    )
    assert [(where, key) for where, key in keys_of(payload) if RUN_FACT_KEYS.search(key)] == []
    assert "42" not in json.dumps(payload["certificate"])


def test_the_distilled_payload_and_the_files_it_hashes_hold_no_run_facts(distilled_example):
    _, run, path = distilled_example
    payload = json.loads(path.read_bytes())["payload"]
    assert [(where, key) for where, key in keys_of(payload) if RUN_FACT_KEYS.search(key)] == []
    assert socket.gethostname() not in path.read_text()
    for entry in payload["certificate"]:
        if entry["smt2"]:
            header = (run.report_path / entry["smt2"]).read_text().split("(set-info", 1)[0]
            assert "; seconds:" not in header, entry["smt2"]
    summary = json.loads((run.report_path / "summary.json").read_text())
    assert summary["run"]["seconds"]["total"] > 0 and summary["run"]["jobs"] == 1
    assert summary["run"]["work_budget"] == {"boxes": 20_000, "engine_queries": 8, "z3_rlimit": 20_000_000}
    assert all(isinstance(entry["seconds"], float) for entry in summary["certificate"])


@pytest.mark.slow
def test_the_wall_clock_guard_stops_a_distillation_instead_of_changing_its_table(tmp_path):
    """A guard far too short for the example's engine cells: the run stops naming a cell, and writes nothing."""
    spec = load_spec(example_spec_path("coadapt"))
    checkpoint = tmp_path / "cells.jsonl"
    with pytest.raises(
        EngineError,
        match=r"^cell \d+: the wall-clock guard of 1e-06 s per cell fired before the work "
        r"budget \(20000 boxes, 8 z3 queries, z3 rlimit 20000000\) was spent, so "
        r"this cell's verdict would depend on the machine's speed; no artifact was written; the [\d,]+ cells "
        r"decided so far are kept in the checkpoint " + re.escape(str(checkpoint)) + r" \(running the same "
        r"distill again resumes from it\); give a larger per_cell_timeout= or leave it out \(the work budget "
        r"alone then ends each cell\), or re-run on a less loaded machine$",
    ) as error:
        distill(spec, spec_network(spec), jobs=1, per_cell_timeout=1e-6, checkpoint=checkpoint)
    guarded = int(str(error.value).split(":")[0].split()[1])
    recorded = {json.loads(line).get("cell") for line in checkpoint.read_text().splitlines()[1:]}
    assert recorded and guarded not in recorded  # the checkpoint keeps only what work counts decided


def spec_network(spec):
    from certfsm import load_onnx

    return load_onnx(spec.model_path)


@contextmanager
def busy_cores(count: int):
    """`count` processes spinning on the CPU (this machine's cores) for the duration; stopped by their own handles."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


@pytest.mark.slow
def test_two_distillations_one_under_load_write_the_same_bytes(tmp_path):
    spec = load_spec(example_spec_path("coadapt"))
    quiet = distill_controller(spec, out=tmp_path / "quiet.cfsm", report=tmp_path / "quiet", jobs=2)
    with busy_cores(1):  # with its two workers, three processes want the two cores (four in the parallel suite)
        loaded = distill_controller(spec, out=tmp_path / "loaded.cfsm", report=tmp_path / "loaded", jobs=2)
    assert quiet.certified and loaded.certified
    assert (tmp_path / "quiet.cfsm").read_bytes() == (tmp_path / "loaded.cfsm").read_bytes()
    assert quiet.artifact_sha256 == loaded.artifact_sha256
    for entry in quiet.certificate:
        if entry.smt2:
            assert (tmp_path / "quiet" / entry.smt2).read_bytes() == (tmp_path / "loaded" / entry.smt2).read_bytes()
