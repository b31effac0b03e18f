"""run_batch and its two files: the instance list it reads and the results file it resumes from.

Why: a batch runs for hours and is killed, resumed and run again; a
results file that loses or misreads a row gives a wrong score, and one
that a refusal damaged loses a night of work. So every refusal is pinned
by its message and leaves the file byte for byte as it was, the torn last
line of a killed run is dropped and never glued to the next row, and the
rows do not depend on which worker finished first.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time

import pytest

from batch_instances import HEADER, INSTANCES, make_benchmark
from certfsm import ReportError, VnnlibError
from certfsm.verify import run_batch
from certfsm.verify import _batch
from certfsm.verify._batch import BatchSettings, _task, check_instance, witness_name
from certfsm.verify._instances import read_instances
from certfsm.verify._pool import InlinePool
from certfsm.verify._results_file import HEADER_LINE, ResultRow, ResultsFile


@pytest.fixture
def instance_list(tmp_path):
    return make_benchmark(tmp_path / "bench")


# --- the instance list --------------------------------------------------------------------------------------------


def test_both_forms_of_the_list_are_read_with_paths_resolved_against_its_folder(instance_list):
    with_header = read_instances(instance_list)
    assert [(i.onnx, i.vnnlib, i.expected) for i in with_header] == [
        (onnx, vnnlib, expected or None) for onnx, vnnlib, expected in INSTANCES
    ]
    assert all(i.onnx_path == instance_list.parent / i.onnx and i.timeout == 10 for i in with_header)
    plain = instance_list.with_name("plain.csv")
    plain.write_text("onnx/line.onnx,vnnlib/above_2.vnnlib,116\n\nonnx/line.onnx , vnnlib/at_1.vnnlib,5.5,sat\n")
    assert [(i.key, i.timeout, i.expected, i.line) for i in read_instances(plain)] == [
        (("onnx/line.onnx", "vnnlib/above_2.vnnlib"), 116, None, 1),
        (("onnx/line.onnx", "vnnlib/at_1.vnnlib"), 5.5, "sat", 3),
    ]


def test_a_header_behind_a_byte_order_mark_is_still_a_header(instance_list):
    saved = instance_list.with_name("saved.csv")
    saved.write_bytes(b"\xef\xbb\xbf" + instance_list.read_bytes())
    assert read_instances(saved) == [
        dataclasses.replace(i, onnx_path=saved.parent / i.onnx, vnnlib_path=saved.parent / i.vnnlib)
        for i in read_instances(instance_list)
    ]


BAD_LISTS = [
    ("onnx/line.onnx,vnnlib/above_2.vnnlib\n", r"^.*list\.csv:1: row 'onnx/line\.onnx,vnnlib/above_2\.vnnlib' is not "),
    ("onnx/line.onnx,vnnlib/above_2.vnnlib,soon\n", r"^.*list\.csv:1: timeout='soon' is not a positive number"),
    ("onnx/line.onnx,vnnlib/above_2.vnnlib,-1\n", r"^.*list\.csv:1: timeout='-1' is not a positive number"),
    ("onnx/line.onnx,vnnlib/above_2.vnnlib,nan\n", r"^.*list\.csv:1: timeout='nan' is not a positive number"),
    ("onnx/line.onnx,vnnlib/above_2.vnnlib,9,holds\n", r"^.*list\.csv:1: expected='holds' is not a known answer"),
    (
        "onnx/line.onnx,vnnlib/above_2.vnnlib,9,sat,x\n",
        r"^.*list\.csv:1: row .* is not onnx,vnnlib,timeout\[,expected\]",
    ),
    (
        "onnx/gone.onnx,vnnlib/above_2.vnnlib,9\n",
        r"^.*list\.csv:1: onnx='onnx/gone\.onnx' names no file \(.*gone\.onnx\)",
    ),
    ("onnx/line.onnx,vnnlib/gone.vnnlib,9\n", r"^.*list\.csv:1: vnnlib='vnnlib/gone\.vnnlib' names no file"),
    (f"{HEADER}\nonnx/line.onnx,,9,\n", r"^.*list\.csv:2: row 'onnx/line\.onnx,,9,' is not onnx,vnnlib,timeout"),
    ("onnx,vnnlib,expected\n", r"^.*list\.csv:1: the header onnx,vnnlib,expected lacks the column timeout_s"),
    ("onnx,vnnlib,timeout,timeout_s\n", r"^.*list\.csv:1: the header .* repeats the column timeout_s"),
    (f"{HEADER}\n", r"^.*list\.csv: lists no instance; add a row"),
    (
        "onnx/line.onnx,vnnlib/at_1.vnnlib,9\nonnx/line.onnx,vnnlib/at_1.vnnlib,20\n",
        r"^.*list\.csv:2: repeats the instance of line 1 \(onnx/line\.onnx, vnnlib/at_1\.vnnlib\); remove one",
    ),
]


@pytest.mark.parametrize("text, pattern", BAD_LISTS, ids=[p.split(": ", 1)[-1][:40] for _, p in BAD_LISTS])
def test_a_bad_list_is_refused_naming_the_row_and_field(instance_list, text, pattern):
    bad = instance_list.with_name("list.csv")
    bad.write_text(text)
    with pytest.raises(VnnlibError) as caught:
        read_instances(bad)
    assert re.match(pattern, str(caught.value)), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_list_is_refused_by_name(tmp_path):
    with pytest.raises(VnnlibError, match=r"^.*nowhere\.csv: no such instance list; give a VNN-COMP instances\.csv"):
        read_instances(tmp_path / "nowhere.csv")


# --- the results file ---------------------------------------------------------------------------------------------

ROWS = [
    ResultRow("a.onnx", "p.vnnlib", "unsat", 1.5, 116.0),
    ResultRow("a.onnx", "q, with comma.vnnlib", "unknown", 2.0, 116.0, reason='said "no"\nover two lines'),
]


def written(path, rows=ROWS) -> bytes:
    path.write_text(HEADER_LINE + "".join(row.line() for row in rows))
    return path.read_bytes()


def test_rows_are_read_back_as_written(tmp_path):
    written(tmp_path / "r.csv")
    with ResultsFile(tmp_path / "r.csv") as results:
        assert results.rows == [ROWS[0], ROWS[1]]
        assert results.rows[1].reason == 'said "no" over two lines'


def test_a_torn_last_line_is_dropped_with_a_warning_and_cut_off_before_the_next_row(tmp_path):
    path = tmp_path / "r.csv"
    whole = written(path)
    path.write_bytes(whole + b"a.onnx,r.vnnlib,sa")
    warnings = []
    with ResultsFile(path, warn=warnings.append) as results:
        assert [row.key for row in results.rows] == [row.key for row in ROWS]
        results.append(ResultRow("a.onnx", "r.vnnlib", "sat", 0.5, 116.0, "w.counterexample"))
    assert len(warnings) == 1 and re.match(r"^.*r\.csv: line 4 is incomplete \(a write cut short", warnings[0])
    assert path.read_bytes() == whole + b"a.onnx,r.vnnlib,sat,0.500,116,w.counterexample,\n"


def test_a_torn_header_is_written_again(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(HEADER_LINE.encode()[:9])
    with ResultsFile(path) as results:
        assert results.rows == []
    assert path.read_text() == HEADER_LINE


DAMAGED = [
    (
        b"onnx,vnnlib,timeout_s,expected\nx.onnx,y.vnnlib,116,sat\n",
        r"line 1 is 'onnx,vnnlib,timeout_s,expected', not the header",
    ),
    (b"just some text", r"line 1 is 'just some text', not the header"),
    (HEADER_LINE.encode() + b"a.onnx,p.vnnlib,unsat\n" + ROWS[0].line().encode(), r"line 2 has 3 fields, not 7"),
    (HEADER_LINE.encode() + b"a.onnx,p.vnnlib,holds,1,116,,\nb,c,sat", r"line 2 is not a result row \(verdict='holds'"),
    (HEADER_LINE.encode() + b"a.onnx,p.vnnlib,unsat,fast,116,,\n", r"line 2 is not a result row .*seconds='fast'"),
    (HEADER_LINE.encode() + b"a.onnx,p\xff.vnnlib,unsat,1,116,,\n", r"line 2 is not UTF-8 text"),
    (HEADER_LINE.encode() + (ROWS[0].line() * 2).encode(), r"line 3 records the instance of line 2 again"),
]


@pytest.mark.parametrize("data, pattern", DAMAGED, ids=[p[:30] for _, p in DAMAGED])
def test_a_file_that_is_not_a_results_file_is_refused_and_left_as_it_was(tmp_path, data, pattern):
    path = tmp_path / "r.csv"
    path.write_bytes(data)
    with pytest.raises(ReportError) as caught:
        ResultsFile(path)
    assert re.match(rf"^.*r\.csv: {pattern}.*; left as it is: ", str(caught.value)), str(caught.value)
    assert path.read_bytes() == data


def test_a_second_writer_is_refused_while_the_first_holds_the_file(tmp_path):
    with ResultsFile(tmp_path / "r.csv"):
        with pytest.raises(ReportError, match=r"another certfsm vnnlib-batch is writing this results file"):
            ResultsFile(tmp_path / "r.csv")
    ResultsFile(tmp_path / "r.csv").close()


# --- running ------------------------------------------------------------------------------------------------------


class ReversedPool(InlinePool):
    """Holds every answer until all tasks are in, then hands them back last first: a worker finishing out of order."""

    def __init__(self, jobs, work, context, *, name):
        super().__init__(work, context)
        self.jobs = jobs

    def has_room(self) -> bool:
        return True

    def idle(self, kinds=None) -> bool:
        return not self._done

    def next(self, seconds=None):
        return self._done.pop() if self._done else None


def rows_of(path):
    return path.read_text().splitlines()[1:]


@pytest.mark.slow
def test_rows_do_not_depend_on_the_order_in_which_workers_finish(instance_list, tmp_path):
    first = run_batch(instance_list, tmp_path / "inline.csv", in_list_order=True)
    second = run_batch(
        instance_list, tmp_path / "reversed.csv", in_list_order=True, make_pool=ReversedPool, jobs=len(INSTANCES)
    )
    assert [row.key for row in second.added] == [(o, v) for o, v, _ in reversed(INSTANCES)]

    def without_times(path):
        return [re.sub(r",\d+\.\d+,", ",T,", line).replace(path.stem, "R") for line in rows_of(path)]

    assert without_times(tmp_path / "inline.csv") == without_times(tmp_path / "reversed.csv")
    assert (
        first.summary.counts == second.summary.counts == {"sat": 2, "unsat": 1, "timeout": 0, "unknown": 0, "error": 1}
    )
    assert [row.verdict for row in first.added] == ["unsat", "sat", "sat", "error"]
    assert (tmp_path / "inline.witnesses" / witness_name(*INSTANCES[1][:2])).read_text().startswith("sat\n((X_0 ")


@pytest.mark.slow
def test_a_resumed_run_checks_only_the_instances_without_a_row(instance_list, tmp_path):
    out = tmp_path / "r.csv"
    run_batch(instance_list, out, in_list_order=True)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:-1]))
    again = run_batch(instance_list, out)
    assert [row.key for row in again.added] == [INSTANCES[-1][:2]]
    assert again.skipped == len(INSTANCES) - 1
    assert out.read_text().splitlines(keepends=True)[:-1] == lines[:-1]
    assert again.summary.missing == [] and len(again.summary.seconds) == len(INSTANCES)
    assert run_batch(instance_list, out).added == []


def test_an_unsupported_model_is_an_error_row_with_the_loaders_reason(instance_list):
    sigmoid = next(i for i in read_instances(instance_list) if "sigmoid" in i.onnx)
    outcome = check_instance(BatchSettings(), _task(BatchSettings(), sigmoid))
    assert outcome.verdict == "error" and outcome.result_text == ""
    assert re.match(r"^.*sigmoid\.onnx: node #1 is a final Sigmoid, which is not piecewise linear", outcome.reason)


@pytest.mark.slow
def test_a_check_that_crashes_or_hangs_costs_its_instance_only(instance_list, monkeypatch):
    instance = read_instances(instance_list)[0]
    settings = BatchSettings(timeout_cap=0.2)
    monkeypatch.setattr(_batch, "KILL_GRACE_SECONDS", 0.2)
    monkeypatch.setattr(_batch, "_check_here", lambda settings, task: os.abort())
    crashed = check_instance(settings, _task(settings, instance))
    assert crashed.verdict == "error" and re.match(
        r"^the check's process failed \(killed by signal SIGABRT\)", crashed.reason
    )
    monkeypatch.setattr(_batch, "_check_here", lambda settings, task: time.sleep(30))
    hung = check_instance(settings, _task(settings, instance))
    assert hung.verdict == "timeout" and hung.seconds < 5 and "killed" in hung.reason
