"""`TraceProbe`: replay a recorded CSV trace, one reading per row.

The header names the columns: every input of the spec (by the spec's own
names, in any order) and, optionally, more columns, which are *metrics*
such as ``latency_ms`` for the SLA monitor. A sample's values are the
input columns (so the default calibration, in which each input reads the
quantity of its own name, finds them) and its metrics are the others.

Cells hold decimal numbers as Python's ``float`` reads them; ``nan`` and
``inf`` are kept as such, and an empty cell is missing (None). Neither
is an error, nor is a value outside the spec's envelope: the trace
replays what was recorded, and judging a reading is the runtime's job
(the envelope fallback). Only a malformed file is an error, reported as
one line with the file, the line, the column and the fix: a header
without some input, a repeated column, a cell that is not a number, a
row with the wrong number of cells.

Rows are read lazily, so a long trace costs no memory, and a malformed
row is reported when the replay reaches it. After the last row `sample`
raises EOFError; iterating the probe stops there.
"""

from __future__ import annotations

import csv
import os
import time
from typing import Iterable, Iterator

from certfsm import ProbeError

from ._probes import HardwareProbe, ProbeSample


class TraceProbe(HardwareProbe):
    """The rows of the CSV file at `path`, whose header holds `input_names` (the spec's inputs) and any metrics."""

    label = "trace"

    def __init__(self, path: str | os.PathLike[str], input_names: Iterable[str]) -> None:
        self.path = os.fspath(path)
        self.input_names = tuple(input_names)
        try:
            self._file = open(self.path, "rb")
        except OSError as exc:
            raise ProbeError(
                f"{self.path}: cannot read the trace ({exc.strerror or exc}); give the path of a readable CSV file"
            ) from None
        self._reader = csv.reader(self._lines())
        try:
            header = [cell.strip() for cell in self._next_row()]
        except EOFError:
            self.close()
            raise ProbeError(
                f"{self.path}: the trace is empty; write a header line naming the columns "
                f"({', '.join(self.input_names)}) and one row per reading"
            ) from None
        except ProbeError:
            self.close()
            raise
        self.columns = tuple(header)
        problem = self._header_problem()
        if problem:
            self.close()
            raise ProbeError(f"{self.path}:{self._reader.line_num}: {problem}")
        self.metric_names = tuple(name for name in self.columns if name not in self.input_names)
        self._is_input = tuple(name in self.input_names for name in self.columns)

    def _header_problem(self) -> str | None:
        for index, name in enumerate(self.columns):
            if name in self.columns[:index]:
                return (
                    f"column {name!r} appears twice in the header (columns {self.columns.index(name) + 1} "
                    f"and {index + 1}); keep one"
                )
        for name in self.input_names:
            if name not in self.columns:
                return (
                    f"the header has no column {name!r} (it has {', '.join(map(repr, self.columns))}); add "
                    f"a {name} column, with empty or nan cells where it was not measured"
                )
        return None

    @property
    def quantities(self) -> frozenset[str]:
        return frozenset(self.input_names)

    def _lines(self) -> Iterator[str]:
        """The file's lines as text, decoded one by one so that a bad byte is reported on its own line."""
        for number, raw in enumerate(self._file, 1):
            try:
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise ProbeError(
                    f"{self.path}:{number}: byte {exc.start + 1} of the line is not UTF-8; save the trace as UTF-8 CSV"
                ) from None

    def _next_row(self) -> list[str]:
        """The next non-blank row; EOFError at the end of the file."""
        try:
            for row in self._reader:
                if row:
                    return row
        except (csv.Error, OSError) as exc:
            raise ProbeError(
                f"{self.path}:{self._reader.line_num}: cannot read the CSV ({exc}); fix the row there"
            ) from None
        raise EOFError(f"{self.path}: no more rows")

    def sample(self, now: float | None = None) -> ProbeSample:
        """The next row as a sample stamped `now` (default ``time.monotonic()``); EOFError after the last row."""
        if self._file.closed:
            raise EOFError(f"{self.path}: no more rows")
        try:
            row = self._next_row()
        except EOFError:
            self.close()
            raise
        line = self._reader.line_num
        if len(row) != len(self.columns):
            raise ProbeError(
                f"{self.path}:{line}: {len(row)} cells, expected {len(self.columns)} (one per header "
                f"column: {', '.join(self.columns)}); fix the row (an empty cell still needs its comma)"
            )
        values: dict[str, float | None] = {}
        metrics: dict[str, float | None] = {}
        for index, (name, is_input, cell) in enumerate(zip(self.columns, self._is_input, row)):
            target = values if is_input else metrics
            target[name] = self._number(cell, line, index, name)
        return ProbeSample(time.monotonic() if now is None else now, values, metrics)

    def _number(self, cell: str, line: int, index: int, name: str) -> float | None:
        text = cell.strip()
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            shown = cell if len(cell) <= 40 else cell[:37] + "..."
            raise ProbeError(
                f"{self.path}:{line}: column {index + 1} ({name}) = {shown!r} is not a number; "
                "write a decimal number, nan, or leave the cell empty where nothing was measured"
            ) from None

    def __iter__(self) -> Iterator[ProbeSample]:
        while True:
            try:
                yield self.sample()
            except EOFError:
                return

    def close(self) -> None:
        self._file.close()
