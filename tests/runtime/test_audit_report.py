"""`certfsm audit report`: figures and a report.md for people, from a logged run of the example trace."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from cli_in_process import run_main
from cli_run import run_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def logged_run(distilled_example, tmp_path_factory):
    log = tmp_path_factory.mktemp("report") / "run.log"
    code, _, err = run_main("run", distilled_example[2], "--probe", "example-trace", "--audit", log)
    assert code == 0, err
    return log


@pytest.mark.slow
def test_the_report_holds_pngs_and_a_markdown_that_counts_the_logged_tokens(distilled_example, logged_run, tmp_path):
    from certfsm.runtime import load_machine, read_log
    from certfsm.runtime._audit_format import StepRecord

    out = tmp_path / "report"
    code, stdout, err = run_main("audit", "report", logged_run, "--out", out, "--artifact", distilled_example[2])
    assert code == 0, err
    for name in ("timeline.png", "probes.png", "reasons.png", "decision_map.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and 10_000 < len(data) < 2_000_000, name
    text = (out / "report.md").read_text()
    machine = load_machine(distilled_example[2])
    logged = Counter(machine.tokens[r.token] for r in read_log(logged_run) if isinstance(r, StepRecord))
    for token in machine.tokens:
        assert f"| {token} | {logged[token]} |" in text
    assert all(f"]({name})" in text for name in ("timeline.png", "probes.png", "reasons.png", "decision_map.png"))
    assert machine.artifact_sha256 in text and "**verifies**" in text and "% of cycles with sla_ok" in text
    assert re.search(r"\| FALLBACK_SLA \| [1-9]\d* \|", text)


@pytest.mark.slow
def test_a_tampered_log_gets_a_report_that_names_the_bad_record_and_exit_1(logged_run, tmp_path):
    tampered = tmp_path / "tampered.log"
    data = bytearray(logged_run.read_bytes())
    data[len(data) // 2] ^= 0x10
    tampered.write_bytes(bytes(data))
    out = tmp_path / "report"
    code, stdout, err = run_cli("audit", "report", tampered, "--out", out)
    assert code == 1, err
    index = int(re.search(r"record (\d+) is bad", stdout).group(1))
    text = (out / "report.md").read_text()
    assert "**DOES NOT VERIFY**" in text and f"record {index} is bad" in text and 800 <= index <= 1200
    assert (
        "- token names: not given (give the artifact the log was written with); tokens are named by output index "
        "and code" in text.splitlines()
    )
    assert f"- steps reported: {index}" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (("--x", "nowhere"), r"^certfsm: error: --x nowhere is not an input of the log; the inputs are compute_util, "),
        (("--x", "compute_util", "--y", "compute_util"), r"^certfsm: error: --x and --y both name compute_util"),
    ],
)
def test_bad_report_flags_are_one_line_and_exit_2(logged_run, tmp_path, args, message):
    code, _, err = run_main("audit", "report", logged_run, "--out", tmp_path / "r", *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and re.match(message, lines[0]), err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_write_audit_report_names_its_parameters_not_the_flags(logged_run, coarse_example, tmp_path):
    from certfsm import ReportError, UsageError
    from certfsm.runtime import write_audit_report

    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    refusals = [
        (
            {"x_input": "nowhere"},
            UsageError,
            r"^x_input='nowhere' is not an input of the log; the inputs are "
            r"compute_util, ",
        ),
        (
            {"x_input": "compute_util", "y_input": "compute_util"},
            UsageError,
            r"^x_input= and y_input= both name compute_util; give two different inputs$",
        ),
        (
            {"artifact": coarse_example},
            UsageError,
            rf"^artifact={re.escape(repr(str(coarse_example)))}: artifact [0-9a-f]{{12}} is not the one the log names "
            r"\([0-9a-f]{12}\); give the artifact the log was written with$",
        ),
    ]
    for kwargs, error_type, pattern in refusals:
        with pytest.raises(error_type, match=pattern) as error:
            write_audit_report(logged_run, tmp_path / "r", **kwargs)
        assert "--" not in str(error.value)
    with pytest.raises(
        ReportError,
        match=rf"^{re.escape(str(in_the_way))}: exists and is not a folder; choose "
        r"another out= path$",
    ):
        write_audit_report(logged_run, in_the_way)
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_the_report_flags_name_what_the_user_typed(logged_run, coarse_example, tmp_path):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    for args, message in [
        (
            ("--out", in_the_way),
            rf"^certfsm: error: {re.escape(str(in_the_way))}: exists and is not a folder; "
            r"choose another --out path$",
        ),
        (
            ("--out", tmp_path / "r", "--artifact", coarse_example),
            rf"^certfsm: error: --artifact {re.escape(str(coarse_example))}: artifact [0-9a-f]{{12}} is not the one the "
            r"log names \([0-9a-f]{12}\); give the artifact the log was written with$",
        ),
    ]:
        code, _, err = run_main("audit", "report", logged_run, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and re.match(message, lines[0]) and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_a_missing_log_is_one_line_and_exit_2(tmp_path):
    code, _, err = run_main("audit", "report", tmp_path / "none.log", "--out", tmp_path / "r")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such audit log" in err


def test_fixed_point_steps_are_pictured_as_real_values_and_left_out_without_the_artifact():
    from certfsm.machine import Machine, MachineParams
    from certfsm.runtime._audit_format import LoggedState, StepRecord
    from certfsm.runtime._report import _real_reading

    machine = Machine(
        names=("a", "b"),
        edges=((0.0, 1.0), (0.0, 8.0)),
        frac_bits=(4, 0),
        tokens=("T",),
        proposal=(0,),
        exact=(True,),
        allowed=(1,),
        params=MachineParams(1, 0, 1, 0, frozenset(), (0,)),
    )

    def record(reading, fixed):
        return StepRecord(0, 0.0, reading, {}, 0, 0, 0, 0, True, None, LoggedState(0, -1, 0, 0), "", fixed)

    assert _real_reading(record((8, 3), True), machine) == (0.5, 3.0)
    assert all(v != v for v in _real_reading(record((8, 3), True), None))
    assert _real_reading(record((0.25, 2.0), False), None) == (0.25, 2.0)


# ----------------------------------------------------------------- what the pictures show


@pytest.fixture
def figures(monkeypatch):
    """The report's matplotlib figures by title, captured where they are encoded."""
    from certfsm.runtime import _report

    drawn = {}
    encode = _report._png

    def keep(figure):
        drawn[figure.get_suptitle().split(":")[0].split(" (")[0].split(",")[0]] = figure
        return encode(figure)

    monkeypatch.setattr(_report, "_png", keep)
    return drawn


def logged_steps(log):
    from certfsm.runtime import read_log
    from certfsm.runtime._audit_format import StepRecord

    return [r for r in read_log(log) if isinstance(r, StepRecord)]


def runs_of(flags):
    """How many runs of consecutive True values `flags` holds."""
    return sum(1 for k, flag in enumerate(flags) if flag and (k == 0 or not flags[k - 1]))


def with_gid(ax, gid):
    return [a for a in (*ax.patches, *ax.lines, *ax.collections) if a.get_gid() == gid]


@pytest.mark.slow
def test_probe_rows_have_units_envelopes_and_fallbacks_shaded_by_reason(
    distilled_example, logged_run, tmp_path, figures
):
    from certfsm import load_artifact
    from certfsm.machine import Reason
    from certfsm.runtime import write_audit_report

    write_audit_report(logged_run, tmp_path / "r", artifact=distilled_example[2])
    figure = figures["probe trends"]
    stored = load_artifact(distilled_example[2]).stored_spec
    steps = logged_steps(logged_run)
    reasons = [s.reason for s in steps]
    assert reasons.count(Reason.FALLBACK_SLA) > 0 and reasons.count(Reason.FALLBACK_ENVELOPE) > 0
    metric_axes = figure.axes[len(stored.inputs) :]
    assert [ax.get_ylabel() for ax in figure.axes] == [
        "compute_util [%]",
        "mem_bw_util [%]",
        "l2_miss_rate [%]",
        "temperature [degC]",
        "queue_depth [requests]",
        "latency_ms",
    ]
    assert len(metric_axes) == 1
    for k, (ax, item) in enumerate(zip(figure.axes, stored.inputs)):
        (band,) = with_gid(ax, f"envelope-{item.name}")
        assert (band.get_y(), band.get_y() + band.get_height()) == (item.min, item.max)
        missing = sum(1 for s in steps if not math.isfinite(s.reading[k]))
        marks = with_gid(ax, f"missing-{item.name}")
        assert (len(marks[0].get_xdata()) if marks else 0) == missing
    assert sum(len(with_gid(ax, f"missing-{item.name}")) for ax, item in zip(figure.axes, stored.inputs)) > 0
    for ax in figure.axes:
        for reason in (Reason.FALLBACK_SLA, Reason.FALLBACK_ENVELOPE):
            spans = with_gid(ax, f"fallback-{reason.name}")
            assert len(spans) == runs_of([r == reason for r in reasons]), (ax.get_ylabel(), reason)
    (limit,) = with_gid(metric_axes[0], "sla-limit-inference")
    assert list(limit.get_ydata()) == [20.0, 20.0]
    labels = [t.get_text() for legend in figure.legends for t in legend.get_texts()]
    assert f"FALLBACK_SLA ({reasons.count(Reason.FALLBACK_SLA)} steps): an SLA path in breach: see its metric" in labels
    assert (
        f"FALLBACK_ENVELOPE ({reasons.count(Reason.FALLBACK_ENVELOPE)} steps): a reading missing or outside its "
        "envelope" in labels
    )
    assert "envelope [min, max]" in labels


@pytest.mark.slow
def test_without_the_artifact_probe_rows_say_units_are_unknown_and_still_shade_fallbacks(logged_run, tmp_path, figures):
    from certfsm.machine import Reason
    from certfsm.runtime import write_audit_report

    write_audit_report(logged_run, tmp_path / "r")
    figure = figures["probe trends"]
    assert all("[" not in ax.get_ylabel() for ax in figure.axes)
    assert all(not any((a.get_gid() or "").startswith("envelope") for a in ax.patches) for ax in figure.axes)
    assert "units and envelopes unknown: give the artifact the log was written with" in figure.get_suptitle()
    reasons = [s.reason for s in logged_steps(logged_run)]
    assert len(with_gid(figure.axes[0], "fallback-FALLBACK_SLA")) == runs_of(
        [r == Reason.FALLBACK_SLA for r in reasons]
    )
    text = (tmp_path / "r" / "report.md").read_text()
    assert "Units, envelopes and SLA limits are not drawn" in text
    assert "Grid only, no certificate" in text


@pytest.mark.slow
def test_the_decision_map_without_the_artifact_is_titled_uncertified(logged_run, tmp_path, figures):
    from certfsm.runtime import write_audit_report
    from certfsm.runtime._report import UNCERTIFIED_TITLE

    assert UNCERTIFIED_TITLE == "grid only, no certificate: pass --artifact to draw the certified table"
    write_audit_report(logged_run, tmp_path / "r")
    figure = figures["decision map over compute_util and mem_bw_util"]
    (ax,) = figure.axes
    assert ax.get_title().startswith(UNCERTIFIED_TITLE)
    assert "certified" not in figure.get_suptitle()
    assert [c for c in ax.collections if c.get_gid() == "conservative-cells"] == []


@pytest.mark.slow
def test_the_decision_map_with_the_artifact_draws_the_certified_table_and_hatches_its_conservative_cells(
    distilled_example, logged_run, tmp_path, figures
):
    from certfsm.runtime import load_machine, write_audit_report
    from certfsm.runtime._report import UNCERTIFIED_TITLE

    machine = load_machine(distilled_example[2])
    write_audit_report(logged_run, tmp_path / "r", artifact=distilled_example[2])
    (figure,) = [f for title, f in figures.items() if title.startswith("decision map")]
    table_ax, run_ax = figure.axes
    assert table_ax.get_title().startswith(f"certified table of artifact {machine.artifact_sha256[:12]} (sha256)")
    assert UNCERTIFIED_TITLE not in table_ax.get_title() + run_ax.get_title() + figure.get_suptitle()
    assert table_ax.get_xlabel() == "mem_bw_util [%]" and table_ax.get_ylabel() == "compute_util [%]"
    # oracle: the scalar reference places each reading; per (x bin, y bin) the most visited cell decides
    x, y = machine.names.index("mem_bw_util"), machine.names.index("compute_util")
    visits = {}
    for step in logged_steps(logged_run):
        cell = machine.cell_of(step.reading)
        if cell is None or cell < 0:
            continue
        index = []
        rest = cell
        for edges in reversed(machine.edges):
            index.append(rest % (len(edges) - 1))
            rest //= len(edges) - 1
        index.reverse()
        visits.setdefault((index[y], index[x]), Counter())[cell] += 1
    most = {place: max(counter.items(), key=lambda item: (item[1], -item[0]))[0] for place, counter in visits.items()}
    conservative = sum(1 for cell in most.values() if not machine.exact[cell])
    assert conservative > 0
    (hatched,) = [c for c in table_ax.collections if c.get_gid() == "conservative-cells"]
    assert len(hatched.get_paths()) == conservative
    labels = [t.get_text() for legend in figure.legends for t in legend.get_texts()]
    assert "hatched: holds KEEP (the conservative token), not proved for the network" in labels
    text = (tmp_path / "r" / "report.md").read_text()
    assert f"Left, the certified table of artifact `{machine.artifact_sha256[:12]}`" in text
    assert "A hatched cell holds the conservative token KEEP" in text and "Grid only" not in text
    assert "with its envelope [min, max] as a green band" in text
