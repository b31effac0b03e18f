"""The exported C header's constants: a C program compiled against the header reads every token code and reason
code, and their values are the artifact's token codes and the runtime's `Reason`.

The expected values are read from where they are defined (the artifact's payload, `certfsm.machine.Reason`, the reasons the runtime reports),
never from the printer, and the program runs the exported C once so the constants are checked in use as well.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from tiny_machine import tiny_machine

from certfsm import SpecError
from certfsm.hdl_export import export_c, hardware_of, print_c
from certfsm.hdl_export._c import REASON_MEANINGS, token_macros
from certfsm.machine import Reason

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed (apt-get install -y gcc)")
GCC = ("gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic")

PROGRAM = """#include <stdio.h>
#include "{name}.h"

int main(void)
{{
    {name}_state state;
    {name}_output out;
    {name}_reset(&state, &out);
{prints}
    /* in use: after a reset the outputs hold the conservative token, reason KEEP_CURRENT */
    printf("reset %d %d\\n", out.token_code == {conservative}, out.reason_code == CERTFSM_REASON_KEEP_CURRENT);
    switch (out.reason_code) {{
    case CERTFSM_REASON_FALLBACK_SLA: printf("switch sla\\n"); break;
    case CERTFSM_REASON_KEEP_CURRENT: printf("switch keep\\n"); break;
    default: printf("switch other\\n"); break;
    }}
    return 0;
}}
"""


def header_constants(folder, name: str) -> dict[str, int]:
    """Every #define CERTFSM_TOKEN_* and CERTFSM_REASON_* of the header, as the compiled program prints it."""
    header = (folder / f"{name}.h").read_text()
    macros = re.findall(r"^#define (CERTFSM_(?:TOKEN|REASON)_\w+) ", header, re.MULTILINE)
    conservative = next(
        m for m in macros if "the conservative token" in header.split(f"#define {m} ")[1].split("\n")[0]
    )
    prints = "\n".join(f'    printf("{m} %lu\\n", (unsigned long) {m});' for m in macros)
    (folder / "uses_header.c").write_text(PROGRAM.format(name=name, prints=prints, conservative=conservative))
    subprocess.run([*GCC, "-o", "uses_header", "uses_header.c", f"{name}.c"], cwd=folder, check=True)
    lines = subprocess.run([str(folder / "uses_header")], capture_output=True, text=True, check=True).stdout
    *values, reset, switch = lines.splitlines()
    assert (reset, switch) == ("reset 1 1", "switch keep")
    return {macro: int(value) for macro, value in (line.split() for line in values)}


def reasons() -> dict[str, int]:
    return {f"CERTFSM_REASON_{r.name}": int(r) for r in Reason}


@needs_gcc
def test_the_tiny_header_defines_each_token_code_and_reason_for_a_c_program(tmp_path):
    hw = hardware_of(tiny_machine(), "certfsm_tiny")
    header, source = print_c(hw)
    (tmp_path / "certfsm_tiny.h").write_text(header)
    (tmp_path / "certfsm_tiny.c").write_text(source)
    # tiny_machine's tokens HOLD, FAST, SLOW have the codes 0, 5, 9 (not their output indices)
    tokens = {"CERTFSM_TOKEN_HOLD": 0, "CERTFSM_TOKEN_FAST": 5, "CERTFSM_TOKEN_SLOW": 9}
    assert header_constants(tmp_path, "certfsm_tiny") == tokens | reasons()


@pytest.mark.slow
@needs_gcc
def test_the_example_header_holds_the_artifacts_token_codes_and_the_runtimes_reasons(distilled_example, tmp_path):
    artifact = distilled_example[2]
    export_c(artifact, tmp_path / "c")
    spec = json.loads(artifact.read_bytes())["payload"]["spec"]
    tokens = {f"CERTFSM_TOKEN_{token}": code for token, code in spec["tokens"].items()}
    assert len(tokens) == 5
    assert header_constants(tmp_path / "c", "certfsm_coadapt") == tokens | reasons()


def test_the_source_reads_the_reasons_and_token_codes_from_the_header_and_defines_none_of_its_own():
    header, source = print_c(hardware_of(tiny_machine(), "certfsm_tiny"))
    assert not re.search(r"#define \w*(REASON|TOKEN)", source)
    for macro in re.findall(r"^#define (CERTFSM_(?:TOKEN|REASON)_\w+) ", header, re.MULTILINE):
        assert re.search(rf"\b{macro}\b", source), f"{macro} is not used by the source"
    assert "case CERTFSM_TOKEN_FAST: override_token = 1u; break;" in source
    assert "case 2u: next_token_code = CERTFSM_TOKEN_SLOW; break;" in source


def test_the_header_says_in_c_terms_what_each_reason_code_means():
    header, _ = print_c(hardware_of(tiny_machine(), "certfsm_tiny"))
    assert set(REASON_MEANINGS) == set(Reason)
    for reason in Reason:
        line = f"#define CERTFSM_REASON_{reason.name} {int(reason)}u  /* {REASON_MEANINGS[reason]} */"
        assert line in header.splitlines()
    assert "uint32_t reason_code;  /* why this call emitted token_code: one of the CERTFSM_REASON_* codes above */" in (
        header
    )
    assert "#define CERTFSM_TOKEN_HOLD 0u  /* token HOLD, output index 0; the conservative token; overridable */" in (
        header
    )


@pytest.mark.parametrize(
    "tokens, names",
    [
        (("HOLD", "FAST", "SLOW"), ("HOLD", "FAST", "SLOW")),
        (("hold", "Fast_2", "_slow"), ("HOLD", "FAST_2", "_SLOW")),
        (("a-b", "x y", "ü"), ("A_B", "X_Y", "_")),
    ],
)
def test_token_names_become_c_names(tokens, names):
    assert token_macros(tiny_machine(tokens=tokens)) == tuple(f"CERTFSM_TOKEN_{n}" for n in names)


@pytest.mark.parametrize(
    "tokens, pattern",
    [
        (
            ("HOLD", "fast", "FAST"),
            r"^tokens 'fast' and 'FAST' both become the C name CERTFSM_TOKEN_FAST in the exported header; "
            r"rename one of them in the spec's outputs$",
        ),
        (
            ("HOLD", "a-b", "a_b"),
            r"^tokens 'a-b' and 'a_b' both become the C name CERTFSM_TOKEN_A_B in the exported header; ",
        ),
        (
            ("HOLD", "T" * 49 + "1", "T" * 49 + "2"),
            r"^tokens 'T{49}1' and 'T{49}2' both become the C name CERTFSM_TOKEN_T{49} in the exported "
            r"header; rename one",
        ),
    ],
)
def test_token_names_that_give_one_c_name_are_refused_naming_both(tokens, pattern):
    with pytest.raises(SpecError, match=pattern):
        print_c(hardware_of(tiny_machine(tokens=tokens), "certfsm_tiny"))
