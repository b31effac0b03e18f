"""Calibration: the default mapping, scale and offset applied, and one pinned message per bad calibration file."""

from __future__ import annotations

import json
import math

import pytest

from certfsm import CertfsmError, ProbeError
from certfsm.runtime._calibration import Calibration, InputCalibration
from certfsm.runtime._probes import ProbeSample
from certfsm.runtime._probes_linux import LinuxProbe

EXAMPLE_INPUTS = ("compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth")
SAMPLE = ProbeSample(
    0.0,
    {
        "compute_util": 40.0,
        "mem_bw_util": None,
        "mem_util": 30.0,
        "l2_miss_rate": math.nan,
        "temperature": 61000.0,
        "queue_depth": 5.0,
    },
)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(folder, document, name="cal.json"):
    text = document if isinstance(document, str) else json.dumps(document)
    (folder / name).write_text(text, encoding="utf-8")
    return name


def test_identity_reads_each_input_from_the_quantity_of_its_name():
    calibration = Calibration.identity(EXAMPLE_INPUTS)
    reading = calibration.reading(SAMPLE)
    assert reading[0] == 40.0 and reading[1] is None and math.isnan(reading[2]) and reading[3:] == (61000.0, 5.0)
    assert calibration.names == EXAMPLE_INPUTS
    calibration.check_probe(LinuxProbe())  # every example input is a quantity the Linux probe reports


def test_a_file_scales_offsets_and_remaps_only_what_it_names(workdir):
    name = write(
        workdir,
        {
            "certfsm_calibration": 1,
            "inputs": {
                "temperature": {"scale": 0.001, "offset": -1.5},
                "mem_bw_util": {"quantity": "mem_util"},
                "queue_depth": {"offset": 2},
            },
        },
    )
    calibration = Calibration.load(name, EXAMPLE_INPUTS)
    assert calibration.source == "cal.json" and calibration.names == EXAMPLE_INPUTS
    assert calibration.inputs[3] == InputCalibration("temperature", "temperature", 0.001, -1.5)
    reading = calibration.reading(SAMPLE)
    assert reading[0] == 40.0 and reading[1] == 30.0 and math.isnan(reading[2])
    assert reading[3] == pytest.approx(59.5) and reading[4] == 7.0


def test_applying_never_raises_for_values():
    calibration = Calibration((InputCalibration("a", "a", -2.0, 1.0), InputCalibration("b", "b", 1e308, 0.0)))
    assert calibration.reading(ProbeSample(0.0, {"a": math.inf, "b": 1e10})) == (-math.inf, math.inf)
    assert calibration.reading(ProbeSample(0.0, {})) == (None, None)


def test_an_input_reading_a_quantity_the_probe_never_reports_is_refused_before_the_first_cycle(workdir):
    calibration = Calibration.load(
        write(workdir, {"certfsm_calibration": 1, "inputs": {"temperature": {"quantity": "gpu_temp"}}}), EXAMPLE_INPUTS
    )
    with pytest.raises(
        ProbeError,
        match=r"^cal\.json: input temperature reads quantity 'gpu_temp', which the linux "
        r"probe does not report \(it reports compute_util, l1_miss_rate, .*\); set "
        r"inputs\.temperature\.quantity to one of those$",
    ):
        calibration.check_probe(LinuxProbe())


def test_a_free_text_spec_needs_a_mapping_for_a_hardware_probe():
    with pytest.raises(
        ProbeError, match=r"^default calibration: input rho reads quantity 'rho', which the linux probe"
    ):
        Calibration.identity(["rho", "theta"]).check_probe(LinuxProbe())


def entry(**fields):
    return {"certfsm_calibration": 1, "inputs": {"temperature": fields}}


BAD_CALIBRATIONS = [
    (
        "unknown-input",
        {"certfsm_calibration": 1, "inputs": {"temp": {"scale": 2}}},
        r"^cal\.json: inputs\.temp names no input of the spec \(its inputs: compute_util, mem_bw_util, l2_miss_rate, "
        r"temperature, queue_depth\); use one of those names or remove the entry$",
    ),
    (
        "unknown-input-odd-name",
        {"certfsm_calibration": 1, "inputs": {"gpu temp": {}}},
        r'^cal\.json: inputs\["gpu temp"\] names no input of the spec',
    ),
    (
        "scale-nan",
        '{"certfsm_calibration": 1, "inputs": {"temperature": {"scale": NaN}}}',
        r"^cal\.json: inputs\.temperature\.scale=NaN is not finite; write a finite number$",
    ),
    (
        "scale-infinity",
        '{"certfsm_calibration": 1, "inputs": {"temperature": {"scale": -Infinity}}}',
        r"^cal\.json: inputs\.temperature\.scale=-Infinity is not finite; write a finite number$",
    ),
    (
        "scale-overflow",
        '{"certfsm_calibration": 1, "inputs": {"temperature": {"scale": 1e999}}}',
        r"^cal\.json: inputs\.temperature\.scale=Infinity is not finite; write a finite number$",
    ),
    (
        "scale-huge-int",
        '{"certfsm_calibration": 1, "inputs": {"temperature": {"scale": 1' + "0" * 400 + "}}}",
        r"^cal\.json: inputs\.temperature\.scale=10{36}\.\.\. is not finite; write a finite number$",
    ),
    (
        "offset-nan",
        '{"certfsm_calibration": 1, "inputs": {"temperature": {"offset": NaN}}}',
        r"^cal\.json: inputs\.temperature\.offset=NaN is not finite; write a finite number$",
    ),
    (
        "scale-zero",
        entry(scale=0),
        r"^cal\.json: inputs\.temperature\.scale=0 would map every reading to the offset; write a nonzero scale "
        r"\(1\.0 leaves the reading as it is\)$",
    ),
    ("scale-minus-zero", entry(scale=-0.0), r"^cal\.json: inputs\.temperature\.scale=0 would map every reading"),
    (
        "scale-string",
        entry(scale="0.001"),
        r'^cal\.json: inputs\.temperature\.scale="0\.001" is a string, not a number; write a number such as 1\.0$',
    ),
    (
        "scale-bool",
        entry(scale=True),
        r"^cal\.json: inputs\.temperature\.scale=true is a boolean, not a number; write a number such as 1\.0$",
    ),
    ("scale-null", entry(scale=None), r"^cal\.json: inputs\.temperature\.scale=null is null, not a number;"),
    (
        "offset-list",
        entry(offset=[1]),
        r"^cal\.json: inputs\.temperature\.offset=\[1\] is an array, not a number; write a number such as 0\.0$",
    ),
    (
        "quantity-number",
        entry(quantity=3),
        r'^cal\.json: inputs\.temperature\.quantity=3 is not a quantity name; write a non-empty string such as "temperature"$',
    ),
    ("quantity-empty", entry(quantity=""), r'^cal\.json: inputs\.temperature\.quantity="" is not a quantity name;'),
    (
        "unknown-field",
        entry(gain=2),
        r"^cal\.json: inputs\.temperature\.gain is not a field of an input's calibration; use quantity, scale, offset$",
    ),
    (
        "entry-not-object",
        {"certfsm_calibration": 1, "inputs": {"temperature": 0.001}},
        r'^cal\.json: inputs\.temperature is a number; write an object such as \{"scale": 1\.0, "offset": 0\.0\}$',
    ),
    (
        "inputs-not-object",
        {"certfsm_calibration": 1, "inputs": ["temperature"]},
        r"^cal\.json: inputs is an array; write an object from input name to its calibration$",
    ),
    (
        "top-not-object",
        [],
        r'^cal\.json: top level is an array; write an object such as \{"certfsm_calibration": 1, "inputs": \{\}\}$',
    ),
    (
        "unknown-top-field",
        {"certfsm_calibration": 1, "input": {}},
        r"^cal\.json: input is not a field of a calibration file; use certfsm_calibration and inputs$",
    ),
    (
        "no-version",
        {"inputs": {}},
        r'^cal\.json: certfsm_calibration is missing; write "certfsm_calibration": 1 \(the only version\)$',
    ),
    (
        "wrong-version",
        {"certfsm_calibration": 2, "inputs": {}},
        r'^cal\.json: certfsm_calibration=2 is not a calibration format this certfsm reads; write "certfsm_calibration": 1',
    ),
    (
        "version-bool",
        {"certfsm_calibration": True},
        r"^cal\.json: certfsm_calibration=true is not a calibration format",
    ),
    (
        "invalid-json",
        '{"certfsm_calibration": 1,\n "inputs": {"temperature": {"scale": 0.001,}}}',
        r"^cal\.json: line 2, column 44: invalid JSON \(Expecting property name enclosed in double quotes\); "
        r"fix the JSON syntax there$",
    ),
    (
        "repeated-key",
        '{"certfsm_calibration": 1, "inputs": {"temperature": {"scale": 1, "scale": 2}}}',
        r"^cal\.json: key 'scale' appears more than once in one object \(JSON would keep only the last\); keep one$",
    ),
]


@pytest.mark.parametrize(
    "document, pattern", [case[1:] for case in BAD_CALIBRATIONS], ids=[case[0] for case in BAD_CALIBRATIONS]
)
def test_bad_calibration_is_refused_with_a_pinned_message(workdir, document, pattern):
    with pytest.raises(ProbeError, match=pattern) as caught:
        Calibration.load(write(workdir, document), EXAMPLE_INPUTS)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, CertfsmError)


def test_unreadable_calibration_files(workdir):
    with pytest.raises(
        ProbeError,
        match=r"^absent\.json: cannot read the calibration file \(No such file or "
        r"directory\); give the path of a readable UTF-8 JSON file$",
    ):
        Calibration.load("absent.json", EXAMPLE_INPUTS)
    (workdir / "latin1.json").write_bytes(b'{"certfsm_calibration": 1, "inputs": {"temp\xe9rature": {}}}')
    with pytest.raises(ProbeError, match=r"^latin1\.json: cannot read the calibration file \(not UTF-8 text\);"):
        Calibration.load("latin1.json", EXAMPLE_INPUTS)
