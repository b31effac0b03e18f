"""A VNN-COMP instance list (``instances.csv``) read into `Instance` values, or refused by row and field.

VNN-COMP's file has one instance per row, ``onnx,vnnlib,timeout``, paths
relative to the file's folder and no header. The benchmark folders of
certfsm (../shared/benchmarks/*/instances.csv) add the header
``onnx,vnnlib,timeout_s,expected``, where ``expected`` is the known answer
(``sat`` or ``unsat``) that the batch summary scores against. Both forms
are read: a first row whose first cell is ``onnx`` is a header, and its
column names say where each field is; without one the columns are
positional and a fourth one, when present, is the expected answer.

Everything is checked before any instance runs, so a bad list costs no
solver time: each row has its fields, a positive finite timeout, an
expected answer of ``sat``/``unsat`` or nothing, files that exist, and no
row repeats another's (onnx, vnnlib) pair, the key under which the
results file remembers an instance (`_results_file`). Each refusal is one
`VnnlibError` line naming the file, the row (its line) and the field,
and the fix.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path

from certfsm import VnnlibError

KNOWN_ANSWERS = ("sat", "unsat")
"""The answers an instance list may record as known (VNN-COMP's words for violated and proved)."""

_TIMEOUT_COLUMNS = ("timeout_s", "timeout")
_POSITIONAL = ("onnx", "vnnlib", "timeout", "expected")


@dataclass(frozen=True)
class Instance:
    """One row of an instance list: what to check, for how long, and the answer when it is known.

    `onnx` and `vnnlib` are the paths as written in the list (the key of
    the instance in a results file); `onnx_path` and `vnnlib_path` the
    files they name, resolved against the list's folder. `line` is the
    row's line in the list, for messages. `expected` is ``sat``,
    ``unsat`` or None when the list records no answer.
    """

    onnx: str
    vnnlib: str
    timeout: float
    expected: str | None
    onnx_path: Path
    vnnlib_path: Path
    line: int

    @property
    def key(self) -> tuple[str, str]:
        return self.onnx, self.vnnlib


def read_instances(path: str | os.PathLike) -> list[Instance]:
    """Every instance of the list at `path`, in its order; VnnlibError names the first bad row and field."""
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8-sig")  # a spreadsheet may save a byte-order mark
    except FileNotFoundError:
        raise VnnlibError(
            f"{where}: no such instance list; give a VNN-COMP instances.csv (onnx,vnnlib,timeout per row)"
        ) from None
    except UnicodeDecodeError as error:
        raise VnnlibError(f"{where}: is not UTF-8 text (byte {error.start}); give a csv instance list") from None
    except OSError as error:
        raise VnnlibError(f"{where}: cannot be read ({error.strerror}); check the path and its permissions") from None
    rows = [(number, row) for number, row in enumerate(csv.reader(text.splitlines()), 1) if any(c.strip() for c in row)]
    columns = _POSITIONAL
    if rows and rows[0][1][0].strip().lower() == "onnx":
        columns = _header(where, rows[0][0], rows[0][1])
        rows = rows[1:]
    if not rows:
        raise VnnlibError(f"{where}: lists no instance; add a row onnx,vnnlib,timeout")
    instances: list[Instance] = []
    first_line: dict[tuple[str, str], int] = {}
    for number, row in rows:
        instance = _instance(where, number, row, columns)
        if instance.key in first_line:
            raise VnnlibError(
                f"{where}:{number}: repeats the instance of line {first_line[instance.key]} "
                f"({instance.onnx}, {instance.vnnlib}); remove one of the two rows"
            )
        first_line[instance.key] = number
        instances.append(instance)
    return instances


def _header(where: Path, number: int, row: list[str]) -> tuple[str | None, ...]:
    """The field each column holds (None: a column the batch does not read), from the header row's names."""
    names = [cell.strip().lower() for cell in row]
    columns = tuple(
        "timeout" if name in _TIMEOUT_COLUMNS else name if name in ("onnx", "vnnlib", "expected") else None
        for name in names
    )
    for field in ("onnx", "vnnlib", "timeout"):
        if columns.count(field) != 1:
            written = "timeout_s (or timeout)" if field == "timeout" else field
            raise VnnlibError(
                f"{where}:{number}: the header {','.join(names)} "
                f"{'lacks' if field not in columns else 'repeats'} the column {written}; "
                "name the columns onnx,vnnlib,timeout_s[,expected] once each, or drop the header"
            )
    return columns


def _instance(where: Path, number: int, row: list[str], columns: tuple) -> Instance:
    fields = {name: cell.strip() for name, cell in zip(columns, row) if name is not None}
    if len(row) < 3 or len(row) > len(columns) or not all(fields.get(name) for name in ("onnx", "vnnlib", "timeout")):
        raise VnnlibError(
            f"{where}:{number}: row {','.join(row)!r} is not onnx,vnnlib,timeout"
            f"{'[,expected]' if 'expected' in columns else ''}; write the paths and the timeout in seconds"
        )
    try:
        timeout = float(fields["timeout"])
    except ValueError:
        timeout = math.nan
    if not (math.isfinite(timeout) and timeout > 0):
        raise VnnlibError(
            f"{where}:{number}: timeout={fields['timeout']!r} is not a positive number of seconds; write e.g. 116"
        )
    expected = fields.get("expected") or None
    if expected is not None and expected.lower() not in KNOWN_ANSWERS:
        raise VnnlibError(
            f"{where}:{number}: expected={expected!r} is not a known answer; write sat, unsat or leave it empty"
        )
    paths = {}
    for name in ("onnx", "vnnlib"):
        path = Path(fields[name])
        paths[name] = path if path.is_absolute() else where.parent / path
        if not paths[name].is_file():
            raise VnnlibError(
                f"{where}:{number}: {name}={fields[name]!r} names no file ({paths[name]}); "
                "paths are relative to the list's folder, fix the path or the row"
            )
    return Instance(
        fields["onnx"],
        fields["vnnlib"],
        timeout,
        expected.lower() if expected else None,
        paths["onnx"],
        paths["vnnlib"],
        number,
    )
