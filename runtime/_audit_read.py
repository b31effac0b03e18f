"""Reading audit logs: one walk over the chained frames serves verification, reading and export.

The walk checks, file by file: the header (magic, version, digest), its
link to the previous file (file number, first index, previous chain
hash, same names, the artifact in force), then each frame's kind, its
stored index and its chain hash. It stops at the first frame that fails
and reports it by its index in the whole log, so a reader never sees a
record that does not verify. A short last frame (or a zero-filled tail,
as a power cut can leave) in the last file is a torn tail: the expected
shape of a crash, reported as such, with every record before it intact.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import re
import struct
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from certfsm import AuditLogError

from ._audit import rotated_path
from ._audit_format import (
    GENESIS,
    KIND_CLOSE,
    KIND_NAMES,
    KIND_REFUSAL,
    KIND_SWAP,
    MAGIC,
    FrameLayout,
    LogHeader,
    OverrideRecord,
    Record,
    RefusalRecord,
    StepRecord,
    SwapRecord,
    decode_header,
    json_float,
)

_KIND_AND_INDEX = struct.Struct("<BQ")
_ROTATED = re.compile(r"\.[0-9]+$")

_Data = bytes | mmap.mmap
"""A log file's bytes: memory-mapped (`_mapped`), or b"" for an empty file."""
Frames = Generator[tuple[FrameLayout, bytes, bytes], None, bool]
"""A file's verified frames as (layout, body, chain hash); returns whether the whole file verified."""


@dataclass(frozen=True)
class LogVerification:
    """The verdict on a whole log (every rotated file).

    `ok` only when every frame verifies and the tail is not torn.
    `records` counts the frames that verify (close records of rotated
    files included); they are exactly indexes 0..records-1. `first_bad`
    is the index where verification stopped (None when ok), `reason` says
    why. `torn` marks a crash-shaped end. `closed` says the last file
    ends with the writer's close record. `head` is the chain hash of the
    last verified frame: compare it with an anchor kept elsewhere.
    """

    ok: bool
    records: int
    first_bad: int | None
    reason: str
    torn: bool
    closed: bool
    head: str
    files: tuple[str, ...]

    def describe(self) -> str:
        """One line for people and for the CLI."""
        where = self.files[0]
        if self.ok:
            ending = "closed" if self.closed else "not closed (still being written, or the writer stopped)"
            return f"{where}: intact, {self.records} records in {len(self.files)} file(s), {ending}; head {self.head}"
        if self.torn:
            return (
                f"{where}: torn tail at record {self.first_bad}: {self.reason}; "
                f"the {self.records} records before it verify"
            )
        return f"{where}: record {self.first_bad} is bad: {self.reason}; the {self.records} records before it verify"


def log_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files of the log at `path` (its first file, or a folder holding one log), in rotation order."""
    path = Path(path)
    if path.is_dir():
        firsts = sorted(p for p in path.iterdir() if p.is_file() and not _ROTATED.search(p.name) and _is_log(p))
        if len(firsts) != 1:
            raise AuditLogError(
                f"{path}: folder holds {len(firsts)} audit logs {[p.name for p in firsts]}, "
                "expected 1; give the path of the log's first file"
            )
        path = firsts[0]
    if not path.is_file():
        raise AuditLogError(f"{path}: no such audit log; give the path of the log's first file or of its folder")
    files = [path]
    while rotated_path(path, len(files)).is_file():
        files.append(rotated_path(path, len(files)))
    return files


def _is_log(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(MAGIC)) == MAGIC


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[_Data]:
    """The file's bytes, memory-mapped read-only (an empty file, which mmap refuses, as b"")."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def read_header(path: str | os.PathLike[str]) -> LogHeader:
    """The header of the log's first file (names, artifact, version); AuditLogError if unreadable or torn."""
    first = log_files(path)[0]
    header = decode_header(first.read_bytes(), str(first))
    if header is None:
        raise AuditLogError(
            f"{first}: the header is torn (the writer stopped while creating the file); the log holds no records"
        )
    return header


class _Walk:
    """One verifying pass over a log; `frames()` yields what verifies, then `verification` holds the verdict.

    Files are memory-mapped, so verifying a long log needs no memory in
    proportion to it.
    """

    def __init__(
        self, path: str | os.PathLike[str], on_header: Callable[[Path, LogHeader], None] | None = None
    ) -> None:
        self.files = log_files(path)
        self.on_header = on_header
        self.verification: LogVerification | None = None
        self._index, self._chain = 0, GENESIS
        self._artifact: str | None = None  # the artifact in force, from the first header on
        self._continues: bool | None = None  # the last close record's flag; None before one
        self._first: LogHeader | None = None

    def verdict(self) -> LogVerification:
        """The verification, once `frames()` has run out (every way out of it records one)."""
        if self.verification is None:
            raise AuditLogError(f"{self.files[0]}: the verification was asked for before the walk ended")
        return self.verification

    def frames(self) -> Iterator[tuple[FrameLayout, bytes, bytes]]:
        """Yield (layout, body, chain hash) for each frame that verifies, in log order."""
        for number, path in enumerate(self.files):
            if self._continues is False:
                self._finish(f"{path} follows a log that was closed at record {self._index - 1}")
                return
            with _mapped(path) as data:
                header = self._enter(path, data, number)
                if header is None:
                    return
                layout = FrameLayout(header.input_names, header.metric_names, header.format_version)
                if not (yield from self._file_frames(path, data, layout, header.size, number)):
                    return
        following = rotated_path(self.files[0], len(self.files))
        beyond = rotated_path(self.files[0], len(self.files) + 1)
        if self._continues and beyond.exists():
            self._finish(
                f"{self.files[-1]} says the log continues in {following}, which is missing "
                f"while {beyond} exists: a file was removed"
            )
        elif self._continues:
            self._finish(
                f"{self.files[-1]} says the log continues in {following}, which is missing "
                "(the writer stopped while rotating, or the file was removed)",
                torn=True,
            )
        else:
            self._finish("", closed=self._continues is False)

    def _enter(self, path: Path, data: _Data, number: int) -> LogHeader | None:
        """Check file `number`'s header and its link to the log so far; the header, or None after _finish."""
        try:
            header = decode_header(data, str(path))
        except AuditLogError as error:
            if number == 0:
                raise
            self._finish(str(error))
            return None
        if header is None:
            self._finish(
                f"{path}: the header is torn (the writer stopped while creating the file)",
                torn=number == len(self.files) - 1,
            )
            return None
        first = self._first
        if first is None:  # file 0 (a later file is read only after file 0's header)
            if header.file_number != 0:
                raise AuditLogError(
                    f"{path}: this is file {header.file_number} of a rotated log; give the path of its first file"
                )
            self._first, self._artifact = header, header.artifact_sha256
        else:
            problem = self._link_problem(path, header, number, first)
            if problem:
                self._finish(problem)
                return None
        if self.on_header is not None:
            self.on_header(path, header)
        self._chain, self._continues = bytes.fromhex(header.chain_start), None
        return header

    def _file_frames(self, path: Path, data: _Data, layout: FrameLayout, pos: int, number: int) -> Frames:
        """Yield one file's verified frames from byte `pos` on; return True when the whole file verified."""
        is_last, sha256 = number == len(self.files) - 1, hashlib.sha256
        sizes, end = layout.frame_sizes, len(data)
        while pos < end:
            if self._continues is not None:
                self._finish(f"{path}: bytes follow the close record at byte {pos}")
                return False
            kind = data[pos]
            size = sizes.get(kind)
            if size is None or pos + size > end:
                rest_is_zero = not any(data[pos:])
                what = (
                    f"{end - pos} bytes of a {KIND_NAMES[kind]} record of {size}"
                    if size is not None
                    else f"{end - pos} zero bytes"
                    if rest_is_zero
                    else f"unknown record kind {kind}"
                )
                self._finish(
                    f"{path} ends with {what} at byte {pos}", torn=is_last and (size is not None or rest_is_zero)
                )
                return False
            _, stored_index = _KIND_AND_INDEX.unpack_from(data, pos)
            body, stored = data[pos : pos + size - 32], data[pos + size - 32 : pos + size]
            if stored_index != self._index:
                self._finish(
                    f"the {KIND_NAMES[kind]} record at this position carries index {stored_index}: "
                    "records were removed, inserted or reordered here"
                )
                return False
            if sha256(self._chain + body).digest() != stored:
                self._finish(f"the {KIND_NAMES[kind]} record does not match its chain hash: its bytes were changed")
                return False
            if kind == KIND_SWAP:
                record = layout.decode_swap(body, stored)
                if record.old_sha256 != self._artifact:
                    self._finish(
                        f"the swap record replaces artifact {record.old_sha256}, but {self._artifact} was in force"
                    )
                    return False
                self._artifact = record.new_sha256
            elif kind == KIND_CLOSE:
                self._continues = bool(body[-1])
            elif kind == KIND_REFUSAL:
                refusal = layout.decode_refusal(body, stored)
                if refusal.artifact_sha256 != self._artifact:
                    self._finish(
                        f"the refusal record says artifact {refusal.artifact_sha256} was in force, but "
                        f"{self._artifact} was"
                    )
                    return False
            yield layout, body, stored
            self._chain, self._index, pos = stored, self._index + 1, pos + size
        return True

    def _link_problem(self, path: Path, header: LogHeader, number: int, first: LogHeader) -> str:
        """Why file `number`'s header does not continue the log so far, whose first file's header is `first`
        ('' when it does)."""
        index, chain, artifact = self._index, self._chain, self._artifact
        if header.file_number != number:
            return f"{path}: the header says file {header.file_number}, expected file {number} of the rotation"
        if header.first_index != index:
            return f"{path}: the header says the file starts at record {header.first_index}, expected {index}"
        if header.previous_chain != chain.hex():
            return (
                f"{path}: the header names previous chain hash {header.previous_chain}, but the log before it "
                f"ends at {chain.hex()}: a file was replaced, removed or reordered"
            )
        if header.format_version != first.format_version:
            return (
                f"{path}: the header says format version {header.format_version}, but the log's first file "
                f"has version {first.format_version}: one writer writes one version"
            )
        if (header.input_names, header.metric_names) != (first.input_names, first.metric_names):
            return f"{path}: the header names other inputs or metrics than the log's first file"
        if header.artifact_sha256 != artifact:
            return f"{path}: the header names artifact {header.artifact_sha256}, but {artifact} was in force"
        return ""

    def _finish(self, reason: str, torn: bool = False, closed: bool = False) -> None:
        """Record the verdict at the current index (`reason` empty when the log verified)."""
        index = self._index
        self.verification = LogVerification(
            ok=not reason,
            records=index,
            first_bad=index if reason else None,
            reason=reason,
            torn=torn,
            closed=closed,
            head=self._chain.hex(),
            files=tuple(str(p) for p in self.files),
        )


def verify_log(path: str | os.PathLike[str]) -> LogVerification:
    """Verify the whole log at `path` (first file or folder), following its rotation.

    Never raises for what it finds in the records: the verdict says where
    and why verification stopped. Raises AuditLogError only when the
    first file is not a readable audit log (missing, not a log, other
    format version, corrupt header) or is a later file of a rotation.
    """
    walk = _Walk(path)
    for _ in walk.frames():
        pass
    return walk.verdict()


def read_log(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Yield the log's records in order (StepRecord, SwapRecord, OverrideRecord, CloseRecord, RefusalRecord),
    verifying as it goes.

    Every record yielded has verified. At a bad record it raises
    AuditLogError naming its index; at a torn tail it stops after the
    last intact record (call `verify_log` to learn whether the log was
    torn or closed).
    """
    walk = _Walk(path)
    for layout, body, chain in walk.frames():
        yield layout.decode(body, chain)
    verification = walk.verdict()
    if not verification.ok and not verification.torn:
        raise AuditLogError(verification.describe())


def export_jsonl(
    path: str | os.PathLike[str],
    out: str | Path | TextIO,
    *,
    token_names: Sequence[str] | None = None,
    reason_names: Mapping[int, str] | None = None,
) -> LogVerification:
    """Write the log as JSON Lines to `out` (a path or a text stream) and return its verification.

    Lines: a `header` object at each file, one object per verified record
    (`kind` step, swap, override, close or refusal; a step says whether
    its reading was `fixed` point integers), then one `verification`
    object. Floats are exact (shortest repr); NaN, a missing value, is
    null and infinities are the strings "inf" and "-inf". Export stops at
    the first bad record; the last line says why.

    Names beside numbers: a step keeps `token` (output index), `code` and
    `reason` (its code) and adds `token_name` and `reason_name`; an
    override adds `token_name`. Each name is null where its table is not
    given (`token_names` by output index, `reason_names` by code): this
    module reads bytes and knows no machine, so `runtime.export_jsonl`
    passes the names (`_log_export`).
    """
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8") as stream:
            return export_jsonl(path, stream, token_names=token_names, reason_names=reason_names)
    names = (token_names, reason_names or {})
    write = out.write

    def header_line(file: Path, header: LogHeader) -> None:
        write(
            json.dumps(
                {
                    "kind": "header",
                    "file": str(file),
                    "file_number": header.file_number,
                    "format_version": header.format_version,
                    "first_index": header.first_index,
                    "artifact_sha256": header.artifact_sha256,
                    "previous_chain": header.previous_chain,
                    "inputs": list(header.input_names),
                    "metrics": list(header.metric_names),
                }
            )
            + "\n"
        )

    walk = _Walk(path, on_header=header_line)
    for layout, body, chain in walk.frames():
        write(json.dumps(_jsonable(layout.decode(body, chain), layout, *names)) + "\n")
    verification = walk.verdict()
    write(
        json.dumps(
            {
                "kind": "verification",
                "ok": verification.ok,
                "records": verification.records,
                "first_bad": verification.first_bad,
                "reason": verification.reason,
                "torn": verification.torn,
                "closed": verification.closed,
                "head": verification.head,
            }
        )
        + "\n"
    )
    return verification


def _jsonable(
    record: Record, layout: FrameLayout, tokens: Sequence[str] | None, reasons: Mapping[int, str]
) -> dict[str, Any]:
    kind = type(record).__name__.removesuffix("Record").lower()
    line: dict[str, Any] = {"kind": kind, "index": record.index, "time": json_float(record.time)}
    if isinstance(record, StepRecord):
        line.update(
            reading={n: json_float(v) for n, v in zip(layout.input_names, record.reading)},
            metrics={n: json_float(v) for n, v in record.metrics.items()},
            cell=record.cell,
            token=record.token,
            token_name=None if tokens is None else tokens[record.token],
            code=record.code,
            reason=record.reason,
            reason_name=reasons.get(record.reason),
            sla_ok=record.sla_ok,
            override=record.override,
            state=record.state._asdict(),
            fixed=record.fixed,
        )
    elif isinstance(record, SwapRecord):
        line.update(old_sha256=record.old_sha256, new_sha256=record.new_sha256, state=record.state._asdict())
    elif isinstance(record, OverrideRecord):
        name = None if tokens is None or record.token is None else tokens[record.token]
        line.update(token=record.token, token_name=name, cycles=record.cycles)
    elif isinstance(record, RefusalRecord):
        line.update(artifact_sha256=record.artifact_sha256, refused_sha256=record.refused_sha256, reason=record.reason)
    else:
        line.update(continues=record.continues)
    line["chain"] = record.chain
    return line
