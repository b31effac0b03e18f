"""The audit log's byte layout: a header per file, then chained fixed-size frames.

Everything is little-endian and packed with `struct` (standard library
only: the runtime's scalar path must import without numpy).

File header (one per file, written in one piece when the file is created)::

    offset size
    0      8    magic b"CFSMAUDT"
    8      2    u16  format version (2; version 1 files are read too)
    10     2    u16  header length H in bytes, digest included
    12     4    u32  file number k in the rotation (0 for the first file)
    16     8    u64  index of the file's first record in the whole log
    24     32   artifact SHA-256 in force when the file was opened
    56     32   chain hash of the last record of file k-1 (32 zero bytes for k = 0)
    88     2    u16  number of inputs n
    90     2    u16  number of metrics m
    92     ...  n input names, then m metric names, each u16 length + UTF-8
    H-32   32   SHA-256 of bytes 0..H-32: the header digest

Frames follow the header back to back. A frame is its body followed by a
32-byte chain hash; every body starts with kind (u8), index (u64, the
frame's position in the whole log, counted across files) and time (f64,
seconds, given by the caller)::

    step      kind=1  index time | n x f64 reading | m x f64 metrics (NaN = missing)
                      | i32 cell (-1 out of envelope) | u8 token index | u8 token code
                      | u8 reason | u8 flags (bit 0 sla_ok, bit 1 override requested)
                      | i32 override (0 when none) | u8 current | i8 candidate | u32 count | u32 cooldown
    fixed     kind=5  a step whose reading was fixed-point integers (`Controller.step_fixed`):
                      as step, with n x i64 reading (v means v * 2^-frac_bits) in place of n x f64
    swap      kind=2  index time | 32 old artifact SHA-256 | 32 new artifact SHA-256
                      | u8 current | i8 candidate | u32 count | u32 cooldown  (state the runtime continues from)
    override  kind=3  index time | u8 flags (bit 0 token given, bit 1 cycles given) | i32 token | u64 cycles
    close     kind=4  index time | u8 continues (1: the log goes on in file k+1; 0: the log ends here)
    refusal   kind=6  index time | 32 artifact SHA-256 in force | 32 SHA-256 of the refused artifact (zeros when
                      it did not load) | u16 length L | 1000 bytes: L bytes of UTF-8 saying which file was
                      refused and why, then zeros (a longer text is cut at a character boundary)

The chain: c(-1) of a file is its header digest; frame i stores
c(i) = SHA-256(c(i-1) || body(i)). The header of file k+1 names c of file
k's last frame (its close record), so the chain runs through the
rotation. A frame's size follows from its kind and the header alone, so
a reader finds a torn (short) last frame without any length field.

Why the fixed-point step is a kind of its own: replay must bin a reading
by the path the runtime took, and the integers of the fixed-point path
are exact as i64 where an f64 holds integers exactly only up to 2^53. An
integer beyond the i64 range is logged saturated at the nearer i64 bound;
it bins as the original (out of the envelope) whenever the input's
integer envelope lies inside the i64 range. Version 1 files hold kinds 1
to 4 only: in them, kinds 5 and 6 are unknown kinds, as any other byte.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from certfsm import AuditLogError

if TYPE_CHECKING:
    import mmap

MAGIC = b"CFSMAUDT"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""The versions this certfsm reads: version 2 added the fixed-point step and the refusal record."""
GENESIS = bytes(32)
"""What the header of the first file names as the previous chain hash."""
HASH_SIZE = 32

KIND_STEP, KIND_SWAP, KIND_OVERRIDE, KIND_CLOSE, KIND_STEP_FIXED, KIND_REFUSAL = 1, 2, 3, 4, 5, 6
KIND_NAMES = {
    KIND_STEP: "step",
    KIND_SWAP: "swap",
    KIND_OVERRIDE: "override",
    KIND_CLOSE: "close",
    KIND_STEP_FIXED: "fixed-point step",
    KIND_REFUSAL: "refusal",
}
_KINDS_OF_VERSION = {
    1: (KIND_STEP, KIND_SWAP, KIND_OVERRIDE, KIND_CLOSE),
    2: (KIND_STEP, KIND_SWAP, KIND_OVERRIDE, KIND_CLOSE, KIND_STEP_FIXED, KIND_REFUSAL),
}

FLAG_SLA_OK, FLAG_OVERRIDE = 1, 2
FLAG_TOKEN, FLAG_CYCLES = 1, 2

PREFIX = struct.Struct("<BQd")
"""kind, index, time: the start of every body."""
STATE_FORMAT = "BbII"
_HEADER_FIXED = struct.Struct("<8sHHIQ32s32sHH")
_NAME_LENGTH = struct.Struct("<H")
_SWAP = struct.Struct("<BQd32s32s" + STATE_FORMAT)
_OVERRIDE = struct.Struct("<BQdBiQ")
_CLOSE = struct.Struct("<BQdB")
REFUSAL_TEXT_BYTES = 1000
_REFUSAL = struct.Struct(f"<BQd32s32sH{REFUSAL_TEXT_BYTES}s")
MAX_HEADER = 0xFFFF
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def step_payload(n_inputs: int, n_metrics: int, fixed: bool = False) -> struct.Struct:
    """A step body after its PREFIX: reading (f64, or i64 for a fixed-point step), metrics, cell, token, code,
    reason, flags, override, state."""
    reading = f"{n_inputs}q" if fixed else f"{n_inputs}d"
    return struct.Struct(f"<{reading}{n_metrics}diBBBBi{STATE_FORMAT}")


def step_body(n_inputs: int, n_metrics: int, fixed: bool = False) -> struct.Struct:
    """A whole step body, PREFIX and payload in one `struct` (the writer packs a step in one call)."""
    return struct.Struct(PREFIX.format + step_payload(n_inputs, n_metrics, fixed).format[1:])


# The call form of NamedTuple, because the class form makes mypy refuse a field named `count` (tuple.count).
LoggedState = NamedTuple("LoggedState", [("current", int), ("candidate", int), ("count", int), ("cooldown", int)])
"""The machine state after a step, with the attribute names of `certfsm.fsm.State`, so either can be logged."""


class Registers(Protocol):
    """What the log writes of a state: a `certfsm.machine.State` or a `LoggedState`."""

    @property
    def current(self) -> int: ...

    @property
    def candidate(self) -> int: ...

    @property
    def count(self) -> int: ...

    @property
    def cooldown(self) -> int: ...


@dataclass(frozen=True)
class LogHeader:
    """One file's header. `chain_start` (hex) is the header digest, the chain value before the file's first frame."""

    format_version: int
    file_number: int
    first_index: int
    artifact_sha256: str
    previous_chain: str
    input_names: tuple[str, ...]
    metric_names: tuple[str, ...]
    size: int
    chain_start: str


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step. `metrics` maps every metric named in the header to its value, NaN where it was missing.

    `fixed`: the runtime was given fixed-point integers (`reading` holds them, ints), else real values (floats).
    """

    index: int
    time: float
    reading: tuple[float, ...]
    metrics: dict[str, float]
    cell: int
    token: int
    code: int
    reason: int
    sla_ok: bool
    override: int | None
    state: LoggedState
    chain: str
    fixed: bool = False


@dataclass(frozen=True, slots=True)
class SwapRecord:
    """A hot swap between two steps: the artifact hashes before and after, and the state the runtime went on from."""

    index: int
    time: float
    old_sha256: str
    new_sha256: str
    state: LoggedState
    chain: str


@dataclass(frozen=True, slots=True)
class OverrideRecord:
    """An operator's override request: `token` None clears the override; `cycles` None means until cleared."""

    index: int
    time: float
    token: int | None
    cycles: int | None
    chain: str


@dataclass(frozen=True, slots=True)
class CloseRecord:
    """The last frame of a file: `continues` when the writer rotated to the next file, else the log was closed."""

    index: int
    time: float
    continues: bool
    chain: str


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    """A swap or reload that was refused: the artifact in force went on. `refused_sha256` is None when the new
    artifact did not load; `reason` names the file and why (cut to the format's 1000 bytes)."""

    index: int
    time: float
    artifact_sha256: str
    refused_sha256: str | None
    reason: str
    chain: str


Record = StepRecord | SwapRecord | OverrideRecord | CloseRecord | RefusalRecord


# ------------------------------------------------------------- header


def encode_header(
    *,
    file_number: int,
    first_index: int,
    artifact: bytes,
    previous: bytes,
    input_names: Sequence[str],
    metric_names: Sequence[str],
) -> bytes:
    """The header bytes, digest included; the digest (its last 32 bytes) starts the file's chain."""
    names = b"".join(
        _NAME_LENGTH.pack(len(raw)) + raw for raw in (name.encode("utf-8") for name in (*input_names, *metric_names))
    )
    size = _HEADER_FIXED.size + len(names) + HASH_SIZE
    if size > MAX_HEADER:
        raise AuditLogError(
            f"audit log header: the input and metric names take {size} bytes, "
            f"more than the format's {MAX_HEADER}; use shorter names"
        )
    body = (
        _HEADER_FIXED.pack(
            MAGIC,
            FORMAT_VERSION,
            size,
            file_number,
            first_index,
            artifact,
            previous,
            len(input_names),
            len(metric_names),
        )
        + names
    )
    return body + hashlib.sha256(body).digest()


def decode_header(data: bytes | mmap.mmap, where: str) -> LogHeader | None:
    """The header at the start of `data`, or None when `data` ends inside it (a torn header).

    Raises AuditLogError, naming `where`, when the bytes are not an audit
    log, have another format version, or do not match their digest.
    """
    if len(data) < _HEADER_FIXED.size:
        if MAGIC.startswith(data[: len(MAGIC)]):
            return None
        raise AuditLogError(f"{where}: not a certfsm audit log (no {MAGIC!r} magic); give the path of an audit log")
    magic, version, size, file_number, first_index, artifact, previous, n_inputs, n_metrics = _HEADER_FIXED.unpack_from(
        data
    )
    if magic != MAGIC:
        raise AuditLogError(f"{where}: not a certfsm audit log (no {MAGIC!r} magic); give the path of an audit log")
    if version not in READABLE_VERSIONS:
        raise AuditLogError(
            f"{where}: audit log format version={version}, this certfsm reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}; read it with the certfsm that wrote it"
        )
    if size < _HEADER_FIXED.size + HASH_SIZE:
        raise AuditLogError(f"{where}: corrupt audit log header (header length={size} is too small)")
    if len(data) < size:
        return None
    digest = hashlib.sha256(data[: size - HASH_SIZE]).digest()
    if digest != data[size - HASH_SIZE : size]:
        raise AuditLogError(f"{where}: corrupt audit log header (its SHA-256 does not match its bytes)")
    names, pos = [], _HEADER_FIXED.size
    for _ in range(n_inputs + n_metrics):
        (length,) = _NAME_LENGTH.unpack_from(data, pos)
        names.append(data[pos + 2 : pos + 2 + length].decode("utf-8"))
        pos += 2 + length
    return LogHeader(
        version,
        file_number,
        first_index,
        artifact.hex(),
        previous.hex(),
        tuple(names[:n_inputs]),
        tuple(names[n_inputs:]),
        size,
        digest.hex(),
    )


# ------------------------------------------------------------- frames


class FrameLayout:
    """Sizes and decoders of the frame kinds of one format version, for one header's input and metric counts."""

    def __init__(
        self, input_names: Iterable[str], metric_names: Iterable[str], format_version: int = FORMAT_VERSION
    ) -> None:
        self.input_names, self.metric_names = tuple(input_names), tuple(metric_names)
        self.format_version = format_version
        n, m = len(self.input_names), len(self.metric_names)
        self.step_payload = step_payload(n, m)
        self.fixed_step_payload = step_payload(n, m, fixed=True)
        body_sizes = {
            KIND_STEP: PREFIX.size + self.step_payload.size,
            KIND_SWAP: _SWAP.size,
            KIND_OVERRIDE: _OVERRIDE.size,
            KIND_CLOSE: _CLOSE.size,
            KIND_STEP_FIXED: PREFIX.size + self.fixed_step_payload.size,
            KIND_REFUSAL: _REFUSAL.size,
        }
        self.frame_sizes = {kind: body_sizes[kind] + HASH_SIZE for kind in _KINDS_OF_VERSION[format_version]}

    def decode(self, body: bytes, chain: bytes) -> Record:
        """The record of one verified frame body (its kind byte is known to be valid)."""
        kind, index, time = PREFIX.unpack_from(body)
        if kind == KIND_STEP or kind == KIND_STEP_FIXED:
            fixed = kind == KIND_STEP_FIXED
            values = (self.fixed_step_payload if fixed else self.step_payload).unpack_from(body, PREFIX.size)
            n, m = len(self.input_names), len(self.metric_names)
            cell, token, code, reason, flags, override = values[n + m : n + m + 6]
            return StepRecord(
                index,
                time,
                values[:n],
                dict(zip(self.metric_names, values[n : n + m])),
                cell,
                token,
                code,
                reason,
                bool(flags & FLAG_SLA_OK),
                override if flags & FLAG_OVERRIDE else None,
                LoggedState(*values[n + m + 6 :]),
                chain.hex(),
                fixed,
            )
        if kind == KIND_SWAP:
            return self.decode_swap(body, chain)
        if kind == KIND_OVERRIDE:
            _, _, _, flags, token, cycles = _OVERRIDE.unpack(body)
            return OverrideRecord(
                index, time, token if flags & FLAG_TOKEN else None, cycles if flags & FLAG_CYCLES else None, chain.hex()
            )
        if kind == KIND_REFUSAL:
            return self.decode_refusal(body, chain)
        return CloseRecord(index, time, bool(_CLOSE.unpack(body)[3]), chain.hex())

    @staticmethod
    def decode_swap(body: bytes, chain: bytes) -> SwapRecord:
        """`decode` of a frame body known to be a swap."""
        _, index, time, old, new, *state = _SWAP.unpack(body)
        return SwapRecord(index, time, old.hex(), new.hex(), LoggedState(*state), chain.hex())

    @staticmethod
    def decode_refusal(body: bytes, chain: bytes) -> RefusalRecord:
        """`decode` of a frame body known to be a refusal."""
        _, index, time, in_force, refused, length, text = _REFUSAL.unpack(body)
        return RefusalRecord(
            index,
            time,
            in_force.hex(),
            refused.hex() if any(refused) else None,
            text[:length].decode("utf-8", "replace"),
            chain.hex(),
        )


def swap_body(index: int, time: float, old: bytes, new: bytes, state: Registers) -> bytes:
    return _SWAP.pack(KIND_SWAP, index, time, old, new, state.current, state.candidate, state.count, state.cooldown)


def override_body(index: int, time: float, token: int | None, cycles: int | None) -> bytes:
    flags = (FLAG_TOKEN if token is not None else 0) | (FLAG_CYCLES if cycles is not None else 0)
    return _OVERRIDE.pack(KIND_OVERRIDE, index, time, flags, token or 0, cycles or 0)


def close_body(index: int, time: float, continues: bool) -> bytes:
    return _CLOSE.pack(KIND_CLOSE, index, time, int(continues))


def refusal_body(index: int, time: float, in_force: bytes, refused: bytes | None, reason: str) -> bytes:
    """A refusal frame body; `reason` is cut to REFUSAL_TEXT_BYTES at a character boundary."""
    raw = reason.encode("utf-8")
    if len(raw) > REFUSAL_TEXT_BYTES:
        raw = raw[:REFUSAL_TEXT_BYTES].decode("utf-8", "ignore").encode("utf-8")
    return _REFUSAL.pack(KIND_REFUSAL, index, time, in_force, refused or bytes(32), len(raw), raw)


def saturated_int64(value: int) -> int:
    """`value` within the i64 range of a fixed-point reading: beyond it, the nearer bound (see the module doc)."""
    return INT64_MIN if value < INT64_MIN else INT64_MAX if value > INT64_MAX else value


def json_float(value: float) -> float | str | None:
    """A float as strict JSON: NaN (a missing value) as null, infinities as the strings "inf" and "-inf"."""
    if math.isfinite(value):
        return value
    return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
