"""The results file of `certfsm vnnlib-batch`: one csv row per finished instance, durable as soon as it is written.

Layout: the header `HEADER`, then one line per instance in the order the
instances finished. A row is self-describing (it names its instance by
the onnx and vnnlib paths as the instance list writes them, the key) and
is one line: its reason is kept to one line, so every record ends with
the newline that is the last byte written for it.

Invariants the resume relies on:

- Each row is written with one append and fsynced before the next
  instance is recorded, so a killed run keeps every finished row.
- A write cut short leaves a last line without its newline, and only the
  last line can be cut short: it is dropped with a warning and its
  instance runs again. The file is truncated to its last whole line
  before anything is appended, so the fragment is never glued to a row.
- Any other damage (a foreign header, a whole line that is not a row, an
  instance recorded twice) is refused with one line naming the file and
  the line, and the file is left exactly as it was.
- One writer at a time: the file is locked (``flock``) while a batch
  appends to it, and a second batch on the same file is refused.
"""

from __future__ import annotations

import csv
import fcntl
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from certfsm import ReportError, write_atomically

VERDICTS = ("sat", "unsat", "timeout", "unknown", "error")
"""A row's verdict in VNN-COMP's words: sat (violated, with a witness), unsat (proved), timeout, unknown (with the
reason), error (the instance could not be checked: an unsupported model, a property outside the fragment)."""

HEADER = ("onnx", "vnnlib", "verdict", "seconds", "timeout_s", "witness", "reason")


@dataclass(frozen=True)
class ResultRow:
    """One finished instance: its key, its verdict and how long it took, where its witness is and why.

    `witness` is the path of the VNN-COMP result file of a ``sat`` row,
    relative to the results file's folder ("" for the other verdicts);
    `reason` says why a row is not sat or unsat (one line, "" otherwise).
    """

    onnx: str
    vnnlib: str
    verdict: str
    seconds: float
    timeout: float
    witness: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} is not one of {', '.join(VERDICTS)}")
        object.__setattr__(self, "reason", " ".join(self.reason.split()))

    @property
    def key(self) -> tuple[str, str]:
        return self.onnx, self.vnnlib

    def line(self) -> str:
        """The row as one csv line, newline included."""
        return _csv_line(
            [
                self.onnx,
                self.vnnlib,
                self.verdict,
                f"{self.seconds:.3f}",
                f"{self.timeout:g}",
                self.witness,
                self.reason,
            ]
        )


def _csv_line(cells: list[str]) -> str:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerow(cells)
    return text.getvalue()


HEADER_LINE = _csv_line(list(HEADER))


class ResultsFile:
    """The rows already in a results file, and the one way to add more: `append`, a durable line each.

    Opening reads and checks the whole file under an exclusive lock (see the
    module's invariants) and raises ReportError without changing it when it
    is not a results file; `warn` hears of a dropped incomplete last line.
    `close` releases the lock.
    """

    def __init__(self, path: str | os.PathLike, *, warn: Callable[[str], None] = lambda message: None) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as error:
            raise ReportError(
                f"{self.path}: cannot open the results file ({error.strerror}); choose a writable --out"
            ) from None
        try:
            self._lock()
            self.rows, whole = self._read(warn)
            if whole < os.fstat(self._fd).st_size:
                os.ftruncate(self._fd, whole)
            if whole == 0:
                self._write(HEADER_LINE)
        except BaseException:
            os.close(self._fd)
            raise

    @property
    def keys(self) -> set[tuple[str, str]]:
        return {row.key for row in self.rows}

    def append(self, row: ResultRow) -> None:
        """Add `row` as one line, on disk (fsynced) when this returns."""
        self._write(row.line())
        self.rows.append(row)

    def rewrite_in_order(self, keys: list[tuple[str, str]]) -> None:
        """Replace the file, atomically, by its rows in the order of `keys` (rows of other keys after them)."""
        rank = {key: index for index, key in enumerate(keys)}
        self.rows.sort(key=lambda row: rank.get(row.key, len(rank)))
        text = HEADER_LINE + "".join(row.line() for row in self.rows)
        write_atomically(self.path, text.encode(), what="results file", fix="choose a writable --out")

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _lock(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReportError(
                f"{self.path}: another certfsm vnnlib-batch is writing this results file; "
                "wait for it to finish, or give another --out"
            ) from None

    def _write(self, text: str) -> None:
        data = memoryview(text.encode())
        try:
            while data:
                data = data[os.write(self._fd, data) :]
            os.fsync(self._fd)
        except OSError as error:
            raise ReportError(
                f"{self.path}: cannot append to the results file ({error.strerror}); free space or choose another --out"
            ) from None

    def _read(self, warn: Callable[[str], None]) -> tuple[list[ResultRow], int]:
        """The rows, and the size of the file's whole part (what stays once an incomplete last line is dropped)."""
        chunks = []
        while chunk := os.pread(self._fd, 1 << 20, sum(map(len, chunks))):
            chunks.append(chunk)
        data = b"".join(chunks)
        whole = data.rfind(b"\n") + 1
        if whole == 0:  # no whole line: a new file, or one whose header write was cut short
            if HEADER_LINE.encode().startswith(data):
                return [], 0
            raise self._foreign(data.decode("utf-8", "replace"))
        try:
            lines = [line + "\n" for line in data[: whole - 1].decode("utf-8").split("\n")]
        except UnicodeDecodeError as error:
            number = data[: error.start].count(b"\n") + 1
            if number == 1:
                raise self._foreign(data[: data.find(b"\n")].decode("utf-8", "replace")) from None
            raise self._damaged(number, f"is not UTF-8 text (byte {error.start})", "delete the line") from None
        if lines[0] != HEADER_LINE:
            raise self._foreign(lines[0])
        if whole < len(data):
            warn(
                f"{self.path}: line {len(lines) + 1} is incomplete (a write cut short, e.g. a killed run); "
                "dropped, its instance runs again"
            )
        rows: list[ResultRow] = []
        first_line: dict[tuple[str, str], int] = {}
        for number, text in enumerate(lines[1:], 2):
            if not text.strip():
                continue
            row = self._row(number, text)
            if row.key in first_line:
                raise self._damaged(
                    number, f"records the instance of line {first_line[row.key]} again", "delete one of the two lines"
                )
            first_line[row.key] = number
            rows.append(row)
        return rows, whole

    def _row(self, number: int, text: str) -> ResultRow:
        try:
            (cells,) = list(csv.reader([text]))
        except (ValueError, csv.Error):
            cells = []
        if len(cells) != len(HEADER):
            raise self._damaged(number, f"has {len(cells)} fields, not {len(HEADER)}", "delete the line")
        values = dict(zip(HEADER, cells))
        try:
            seconds, timeout = float(values["seconds"]), float(values["timeout_s"])
        except ValueError:
            seconds = timeout = math.nan
        if values["verdict"] not in VERDICTS or not (math.isfinite(seconds) and math.isfinite(timeout)):
            raise self._damaged(
                number,
                f"is not a result row (verdict={values['verdict']!r}, seconds={values['seconds']!r})",
                "delete the line",
            )
        return ResultRow(
            values["onnx"],
            values["vnnlib"],
            values["verdict"],
            seconds,
            timeout,
            values["witness"],
            values["reason"],
        )

    def _foreign(self, first_line: str) -> ReportError:
        shown = first_line.strip()
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return ReportError(
            f"{self.path}: line 1 is {shown!r}, not the header {HEADER_LINE.strip()!r} of a vnnlib-batch results "
            "file; left as it is: give another --out, or move the file away"
        )

    def _damaged(self, number: int, what: str, fix: str) -> ReportError:
        return ReportError(
            f"{self.path}: line {number} {what}; left as it is: {fix} (its instance then runs again), or give another --out"
        )
