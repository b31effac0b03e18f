"""The report folder: complete or untouched, never half-written; contents match the results."""

import json

import numpy as np
import pytest

from certfsm import ReportError
from certfsm import AffineLayer, Network
from certfsm.verify import _report
from certfsm.verify._property import Conjunction, Property
from certfsm.verify._report import InputNaming, write_report
from certfsm.verify._result import Result

NETWORK = Network((AffineLayer([[1.0, -1.0], [0.5, 0.25]], [0.0, 0.0], "L1"), AffineLayer([[1.0, 1.0]], [0.0], "L2")))
PROPS = [
    Property("holds", [0, 0], [1, 1], (Conjunction([[1.0]], [-1.0]),), "output below -1 is unsafe"),
    Property("fails", [0, 0], [1, 1], (Conjunction([[-1.0]], [-0.5]),), "output above 0.5 is unsafe"),
]
RESULTS = [
    Result("proved", "z3", 0.01),
    Result("violated", "falsify", 0.02, counterexample=np.array([1.0, 0.0]), outputs=np.array([1.5])),
]


def _write(folder, results=RESULTS):
    return write_report(
        folder,
        title="tiny",
        network=NETWORK,
        properties=PROPS,
        results=results,
        naming=InputNaming(("load", "temp"), ("%", "degC"), ("SCORE",)),
        settings={"engine": "auto", "timeout": 5, "jobs": 1},
    )


def test_summary_lists_each_property_with_its_file_and_hash(tmp_path):
    import hashlib

    summary = _write(tmp_path / "r")
    on_disk = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert on_disk["overall"] == "violated" and on_disk["counts"] == {"proved": 1, "violated": 1, "unknown": 0}
    for entry in on_disk["properties"]:
        data = (tmp_path / "r" / entry["smt2"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["smt2_sha256"]
    assert on_disk["properties"][1]["counterexample"] == {"load": 1.0, "temp": 0.0}
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert "| load | 1.0 | % |" in markdown and "**violated**" in markdown
    assert "(1 proved, 1 violated, 0 unknown)" in markdown and "{" not in markdown.split("##")[0]
    assert "Shown: the claim is **false**" in markdown and "Shown: the claim holds" in markdown
    assert "Over the input box load in [" in markdown


def test_a_failure_midway_leaves_the_old_report_untouched_and_no_debris(tmp_path, monkeypatch):
    _write(tmp_path / "r")
    before = {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir()}
    calls = []

    def failing_write(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(path, *args, **kwargs)

    from certfsm.verify import _smtlib

    real = _smtlib.write_smtlib
    monkeypatch.setattr(_smtlib, "write_smtlib", failing_write)
    with pytest.raises(OSError, match="disk full"):
        _write(tmp_path / "r", [Result("unknown", "z3", 1.0, reason="timeout")] * 2)
    assert {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_a_new_report_replaces_the_old_one_whole(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "stale.smt2").write_text("from an older run")
    _write(tmp_path / "r")
    assert "stale.smt2" not in [p.name for p in (tmp_path / "r").iterdir()]


def test_a_file_in_the_way_is_a_clear_error(tmp_path):
    (tmp_path / "r").write_text("not a folder")
    with pytest.raises(ReportError, match=r"^.*r: exists and is not a folder; choose another folder= path$"):
        _write(tmp_path / "r")


@pytest.mark.parametrize("kwargs, parameter", [({}, "folder"), ({"parameter": "report"}, "report")])
def test_a_staged_folder_names_the_callers_parameter_not_a_flag(tmp_path, kwargs, parameter):
    """The fix names the parameter that gave the folder (``report=`` for distill_controller), never a CLI flag."""
    import re

    from certfsm import staged_folder

    (tmp_path / "r").write_text("not a folder")
    with pytest.raises(
        ReportError,
        match=rf"^{re.escape(str(tmp_path / 'r'))}: exists and is not a folder; "
        rf"choose another {parameter}= path$",
    ) as error:
        with staged_folder(tmp_path / "r", **kwargs):
            pass
    assert "--" not in str(error.value)
    blocked = tmp_path / "r" / "inside"
    with pytest.raises(
        ReportError,
        match=rf"^{re.escape(str(blocked))}: cannot create the report folder \(.*\); "
        rf"choose a writable {parameter}= path$",
    ):
        with staged_folder(blocked, **kwargs):
            pass


@pytest.mark.parametrize(
    "verdicts, overall",
    [
        (["proved", "proved"], "proved"),
        (["proved", "unknown"], "unknown"),
        (["unknown", "violated"], "violated"),
        ([], "unknown"),
    ],
)
def test_overall_verdict(verdicts, overall):
    assert _report.overall_verdict(verdicts) == overall


def test_a_report_folder_is_readable_by_others_as_mkdir_would_make_it(tmp_path):
    """Reports go to auditors: the staging folder's private mode (0700) must not survive the swap."""
    import os

    from certfsm import staged_folder

    with staged_folder(tmp_path / "shared") as staging:
        (staging / "summary.json").write_text("{}")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "shared").stat().st_mode & 0o777 == 0o777 & ~umask
