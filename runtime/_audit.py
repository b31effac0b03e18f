"""The audit log writer: one chained binary frame per step, buffered, fsynced by policy, rotated by size.

Why a SHA-256 chain per record rather than per block: on this class of
machine hashing one ~120-byte frame costs about 0.5 microseconds in
CPython, a small share of an append (bench/audit_log.py prints the
figures), and a per-record chain locates any change to its record and
finds a torn tail at record granularity with no second per-record digest.
A block chain would save that half microsecond but could only say "somewhere
in this block" unless every record kept its own digest as well.

What the chain proves: any change, removal, insertion or reordering of
records, or a replaced, removed or reordered rotated file, breaks it at
the first record that no longer follows its predecessor. It does not stop
someone who rewrites a suffix and recomputes its hashes, nor a cut at a
record boundary of the last file: keep the `head` hash of a closed log
somewhere else (a signed report, a remote store) to anchor it against
those.

Durability: a record is committed when `append_*` returns under
`fsync_every=1` (it was written and fsynced before the return). Under
`fsync_every=N` every N-th append writes the buffer out and hands the
fsync to one background thread, so the stepping thread does not wait for
the disk (an fsync costs 1 to 4 ms on this project's virtual disks, as
much as a thousand appends); it waits only when the previous fsync still runs, so
at most 2N records are ever uncommitted. `sync` and `close` commit
everything before they return. A process crash (SIGKILL) loses only what
was still in the writer's buffer, a power cut at most the uncommitted
records; either may tear the last frame written, and the reader reports
a torn tail with everything before it intact.

The byte layout is in `_audit_format`; reading and verification in
`_audit_read`.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from certfsm import AuditLogError

from ._audit_format import (
    FLAG_OVERRIDE,
    FLAG_SLA_OK,
    GENESIS,
    Registers,
    KIND_STEP,
    KIND_STEP_FIXED,
    close_body,
    encode_header,
    override_body,
    refusal_body,
    saturated_int64,
    step_body,
    swap_body,
)

_NAN = math.nan

Reading = Iterable[object]
"""A step's reading: one number per input name, None (or NaN) where missing; ints in a fixed-point reading (a value
the log cannot hold is refused with TypeError naming its input)."""
Metrics = Mapping[str, float | None] | Iterable[float | None] | None
"""A step's metrics: by name (absent or None: missing), or one value per metric in header order; None: none."""


def rotated_path(path: Path, file_number: int) -> Path:
    """File k of the log started at `path`: `path` itself for k = 0, else `path` with the suffix `.k`."""
    return path if file_number == 0 else path.with_name(f"{path.name}.{file_number}")


def _sha256_bytes(value: str, what: str) -> bytes:
    try:
        raw = bytes.fromhex(value)
    except (TypeError, ValueError):
        raw = b""
    if len(raw) != 32:
        raise AuditLogError(f"{what}={value!r} is not a SHA-256 in hex (64 hex digits); pass the artifact's sha256")
    return raw


def _names(names: Iterable[str], what: str) -> tuple[str, ...]:
    given = tuple(names)
    if not all(isinstance(n, str) and n for n in given) or len(set(given)) != len(given):
        raise AuditLogError(f"{what}={list(given)!r} must be distinct non-empty strings; pass the spec's names")
    return given


class AuditWriter:
    """Appends chained records to an audit log; thread-safe (one lock orders appends and the chain).

    `path` is the first file; rotation adds `path.1`, `path.2`, ... when a
    file reaches `rotate_bytes` (None: never). The writer refuses to
    overwrite: `path` and `path.1` must not exist. `fsync_every` is 1 (each
    record is written and fsynced before its append returns), N (every N
    records, by a background thread: see the module's docstring) or 0
    (only at rotation, `sync` and `close`); between fsyncs records wait in
    a buffer that is written out whenever it holds `buffer_bytes`. Time is always the caller's: the writer reads no clock,
    so a log is a pure function of the calls made.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        artifact_sha256: str,
        input_names: Iterable[str],
        metric_names: Iterable[str] = (),
        *,
        fsync_every: int = 1000,
        rotate_bytes: int | None = None,
        buffer_bytes: int = 1 << 16,
    ) -> None:
        self.path = Path(path)
        self._artifact = _sha256_bytes(artifact_sha256, "artifact_sha256")
        self.input_names = _names(input_names, "input_names")
        self.metric_names = _names(metric_names, "metric_names")
        if not isinstance(fsync_every, int) or fsync_every < 0:
            raise AuditLogError(
                f"fsync_every={fsync_every!r} must be an integer >= 0 "
                "(1: every record, N: every N records, 0: on close only)"
            )
        if rotate_bytes is not None and (not isinstance(rotate_bytes, int) or rotate_bytes < 1):
            raise AuditLogError(f"rotate_bytes={rotate_bytes!r} must be a positive integer or None (no rotation)")
        if rotated_path(self.path, 1).exists():
            raise AuditLogError(
                f"{rotated_path(self.path, 1)} exists: {self.path} would mix with an older log; "
                "choose a new path or move the old log away"
            )
        self._fsync_every, self._rotate_bytes, self._buffer_bytes = fsync_every, rotate_bytes, buffer_bytes
        self._metric_set = frozenset(self.metric_names)
        self._n_inputs, self._n_metrics = len(self.input_names), len(self.metric_names)
        self._step_frame = step_body(self._n_inputs, self._n_metrics)
        self._fixed_step_frame = step_body(self._n_inputs, self._n_metrics, fixed=True)
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._chain, self._index, self._time = GENESIS, 0, _NAN
        self._unsynced = 0
        self._file_number, self._file_bytes = 0, 0
        self._fd: int | None = None
        self._failure: BaseException | None = None
        self._syncer = ThreadPoolExecutor(1, "certfsm-audit-fsync") if fsync_every > 1 else None
        self._pending_sync: Future[None] | None = None
        self._open_file()

    # ------------------------------------------------------------- public

    @property
    def head(self) -> str:
        """The chain hash (hex) of the last record appended: anchor it elsewhere to pin the log's end."""
        return self._chain.hex()

    @property
    def records(self) -> int:
        """The number of records appended so far in all files, close records of rotated files included."""
        return self._index

    @property
    def artifact_sha256(self) -> str:
        """The artifact in force: the one given at creation, or the new one of the last swap."""
        return self._artifact.hex()

    def append_step(
        self,
        time: float,
        reading: Reading,
        metrics: Metrics,
        cell: int,
        token: int,
        code: int,
        reason: int,
        state: Registers,
        sla_ok: bool,
        override: int | None = None,
    ) -> int:
        """Log one step; returns its index. `state` is the state after the step (a `State` or `LoggedState`).

        `reading` holds one number per input name (NaN or None when a value
        is missing); `metrics` is a mapping from metric names (absent or
        None: missing) or a sequence in header order. Raises AuditLogError
        (a ValueError) or TypeError, without logging anything, for a value
        the format cannot hold.

        This runs every control cycle, so the frame is packed in one
        `struct` call (prefix and payload together) under the lock, which
        is taken with acquire/release (a `with` block costs twice as much).
        """
        values = self._values(reading, metrics)
        flags = (FLAG_SLA_OK if sla_ok else 0) | (FLAG_OVERRIDE if override is not None else 0)
        lock = self._lock
        lock.acquire()
        try:
            index = self._index
            try:
                body = self._step_frame.pack(
                    KIND_STEP,
                    index,
                    time,
                    *values,
                    cell,
                    token,
                    code,
                    reason,
                    flags,
                    override or 0,
                    state.current,
                    state.candidate,
                    state.count,
                    state.cooldown,
                )
            except (struct.error, AttributeError) as error:
                if None not in values:
                    raise self._explain(error, time, values, cell, token, code, reason, override, state) from None
                # A missing value (None) is logged as NaN; looked for only now, so a full reading costs nothing.
                return self._append_step_with_nan(
                    index, time, values, cell, token, code, reason, flags, override, state
                )
            self._append(body, time)
            return index
        finally:
            lock.release()

    def append_step_fixed(
        self,
        time: float,
        reading: Reading,
        metrics: Metrics,
        cell: int,
        token: int,
        code: int,
        reason: int,
        state: Registers,
        sla_ok: bool,
        override: int | None = None,
    ) -> int:
        """`append_step` for a cycle given fixed-point integers (`Controller.step_fixed`): the reading is logged as
        the integers, so a replay bins it by the fixed-point path. An integer beyond the i64 range is logged
        saturated (`_audit_format` says why that bins the same)."""
        values = self._values(reading, metrics)
        flags = (FLAG_SLA_OK if sla_ok else 0) | (FLAG_OVERRIDE if override is not None else 0)
        n = self._n_inputs
        integers: list[object] = []
        for name, value in zip(self.input_names, values[:n]):
            if isinstance(value, (bool, float)) or not isinstance(value, numbers.Integral):
                raise TypeError(
                    f"append_step_fixed: {name}={value!r} is not an integer; a fixed-point reading "
                    "holds integers v meaning v * 2^-frac_bits"
                )
            integers.append(saturated_int64(int(value)))
        values[:n] = integers
        values[n:] = [_NAN if v is None else v for v in values[n:]]
        with self._lock:
            index = self._index
            try:
                body = self._fixed_step_frame.pack(
                    KIND_STEP_FIXED,
                    index,
                    time,
                    *values,
                    cell,
                    token,
                    code,
                    reason,
                    flags,
                    override or 0,
                    state.current,
                    state.candidate,
                    state.count,
                    state.cooldown,
                )
            except (struct.error, AttributeError) as error:
                raise self._explain(error, time, values, cell, token, code, reason, override, state) from None
            self._append(body, time)
            return index

    def append_refusal(self, time: float, reason: str, refused_sha256: str | None = None) -> int:
        """Log a swap or reload that was refused (the artifact in force goes on): `reason` names the file and
        why; `refused_sha256` is the refused artifact's hash, None when it did not load."""
        refused = None if refused_sha256 is None else _sha256_bytes(refused_sha256, "refused_sha256")
        if not isinstance(reason, str):
            raise TypeError(f"append_refusal: reason={reason!r} is not text; pass the refusal's message")
        with self._lock:
            try:
                body = refusal_body(self._index, time, self._artifact, refused, reason)
            except struct.error as error:
                raise AuditLogError(
                    f"append_refusal: time={time!r} does not fit the log ({error}); pass seconds"
                ) from None
            index = self._index
            self._append(body, time)
            return index

    def append_swap(self, time: float, old_sha256: str, new_sha256: str, state: Registers) -> int:
        """Log a hot swap from `old_sha256` to `new_sha256`; `state` is the state the runtime continues from.

        `old_sha256` must be the artifact in force (the reader checks the same).
        """
        old, new = _sha256_bytes(old_sha256, "old_sha256"), _sha256_bytes(new_sha256, "new_sha256")
        with self._lock:
            if old != self._artifact:
                raise AuditLogError(
                    f"append_swap: old_sha256={old_sha256} is not the artifact in force "
                    f"({self._artifact.hex()}); pass the hash of the artifact being replaced"
                )
            try:
                body = swap_body(self._index, time, old, new, state)
            except (struct.error, AttributeError) as error:
                raise AuditLogError(
                    f"append_swap: time={time!r} state={state!r} do not fit the log ({error}); "
                    "pass seconds and the machine State"
                ) from None
            self._check_open()
            index, self._artifact = self._index, new  # before _append: a rotation it causes names the new artifact
            self._append(body, time)
            return index

    def append_override(self, time: float, token: int | None, cycles: int | None = None) -> int:
        """Log an operator's override request (`token` None clears it; `cycles` None: until cleared)."""
        with self._lock:
            try:
                body = override_body(self._index, time, token, cycles)
            except struct.error as error:
                raise AuditLogError(
                    f"append_override: time={time!r} token={token!r} cycles={cycles!r} do not "
                    f"fit the log ({error}); pass seconds, a token index and a count >= 0 or None"
                ) from None
            index = self._index
            self._append(body, time)
            return index

    def sync(self) -> None:
        """Write out the buffer and fsync: every record appended so far is committed when this returns."""
        with self._lock:
            self._check_open()
            self._write_out(sync=True)

    def close(self) -> None:
        """Append the close record, write out, fsync and close. Idempotent; after an I/O error only closes."""
        with self._lock:
            if self._fd is None:
                return
            try:
                if self._failure is None:
                    self._commit(close_body(self._index, self._time, continues=False))
                    self._write_out(sync=True)
            finally:
                if self._syncer is not None:
                    self._syncer.shutdown(wait=True)  # no fsync may run on a closed descriptor
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "AuditWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------- internals (_values and _explain are pure;
    # the others touch the chain or the file and run under the lock)

    def _values(self, reading: Reading, metrics: Metrics) -> list[object]:
        """The reading and the metrics in header order, as given (None where missing): `struct` checks them."""
        if not (type(reading) is list or type(reading) is tuple):  # `type() in (...)`, spelled for mypy
            reading = list(reading)
        if len(reading) != self._n_inputs:
            raise AuditLogError(
                f"append_step: reading has {len(reading)} values, the log names "
                f"{self._n_inputs} inputs {list(self.input_names)}; pass one value per input"
            )
        if type(metrics) is dict or isinstance(metrics, Mapping):
            if not self._metric_set.issuperset(metrics):
                unknown = sorted(set(metrics) - self._metric_set)
                raise AuditLogError(
                    f"append_step: metrics name {unknown}, which the log's header does not "
                    f"({list(self.metric_names)}); create the log with every metric name"
                )
            values: list[object] = [*reading, *map(metrics.get, self.metric_names)]  # None where absent
        else:
            metrics = () if metrics is None else list(metrics)
            if len(metrics) not in (0, self._n_metrics):
                raise AuditLogError(
                    f"append_step: metrics has {len(metrics)} values, the log names "
                    f"{self._n_metrics} metrics {list(self.metric_names)}; pass a mapping or one "
                    "value per metric"
                )
            values = [*reading, *(metrics or [_NAN] * self._n_metrics)]
        return values  # a None (missing) stays until the pack refuses it; `_append_step_with_nan` logs NaN

    def _append_step_with_nan(
        self,
        index: int,
        time: float,
        values: list[object],
        cell: int,
        token: int,
        code: int,
        reason: int,
        flags: int,
        override: int | None,
        state: Registers,
    ) -> int:
        values = [_NAN if v is None else v for v in values]
        try:
            body = self._step_frame.pack(
                KIND_STEP,
                index,
                time,
                *values,
                cell,
                token,
                code,
                reason,
                flags,
                override or 0,
                state.current,
                state.candidate,
                state.count,
                state.cooldown,
            )
        except (struct.error, AttributeError) as error:
            raise self._explain(error, time, values, cell, token, code, reason, override, state) from None
        self._append(body, time)
        return index

    def _explain(
        self,
        error: Exception,
        time: float,
        values: Sequence[object],
        cell: int,
        token: int,
        code: int,
        reason: int,
        override: int | None,
        state: Registers,
    ) -> Exception:
        """The first argument of a failed step pack, named (only on the error path, so appends stay fast)."""
        try:
            struct.pack("<d", time)
        except struct.error:
            return TypeError(f"append_step: time={time!r} is not a number; pass seconds as a float")
        names = [*self.input_names, *self.metric_names]
        for name, value in zip(names, values):
            try:
                struct.pack("<d", value)
            except struct.error:
                return TypeError(f"append_step: {name}={value!r} is not a number; pass a float, or None when missing")
        fields: list[tuple[str, str, object]] = [
            ("cell", "i", cell),
            ("token", "B", token),
            ("code", "B", code),
            ("reason", "B", reason),
            ("override", "i", override or 0),
        ]
        for attribute, fmt in zip(("current", "candidate", "count", "cooldown"), "BbII"):
            fields.append((f"state.{attribute}", fmt, getattr(state, attribute, None)))
        for name, fmt, value in fields:
            try:
                struct.pack("<" + fmt, value)
            except struct.error as field_error:
                return AuditLogError(
                    f"append_step: {name}={value!r} does not fit the log ({field_error}); pass the machine's own values"
                )
        return AuditLogError(f"append_step: {error}")

    def _check_open(self) -> int:
        """The descriptor of the file being written; AuditLogError once the writer is closed or stopped."""
        if self._failure is not None:
            raise AuditLogError(
                f"{self.path}: the writer stopped after an I/O error ({self._failure}); "
                "verify the log and start a new one"
            )
        if self._fd is None:
            raise AuditLogError(f"{self.path}: the audit log is closed; open a new AuditWriter to log more")
        return self._fd

    def _append(self, body: bytes, time: float) -> None:
        fd = self._fd
        if fd is None or self._failure is not None:
            fd = self._check_open()
        self._chain = chain = hashlib.sha256(self._chain + body).digest()
        self._buffer += body
        self._buffer += chain
        self._index += 1
        self._time = time
        self._unsynced += 1
        if self._fsync_every and self._unsynced >= self._fsync_every:
            if self._syncer is None:
                self._write_out(sync=True)
            else:
                self._write_out(sync=False)
                self._wait_for_sync()
                self._pending_sync = self._syncer.submit(os.fsync, fd)
                self._unsynced = 0
        elif len(self._buffer) >= self._buffer_bytes:
            self._write_out(sync=False)
        if self._rotate_bytes is not None and self._file_bytes + len(self._buffer) >= self._rotate_bytes:
            self._rotate()

    def _commit(self, body: bytes) -> None:
        """Chain and buffer a frame (the close records; `_append` inlines the same for speed)."""
        self._chain = hashlib.sha256(self._chain + body).digest()
        self._buffer += body
        self._buffer += self._chain
        self._index += 1

    def _wait_for_sync(self) -> None:
        """Wait for the background fsync, if one runs, and raise its error."""
        pending, self._pending_sync = self._pending_sync, None
        if pending is not None:
            try:
                pending.result()
            except OSError as error:
                self._failure = error
                raise

    def _write_out(self, sync: bool) -> None:
        """Write the buffer to the file; with `sync`, also fsync (after any background fsync) before returning."""
        fd = self._check_open()  # its callers write to an open file only: this never raises
        if sync:
            self._wait_for_sync()
        data = bytes(self._buffer)
        self._buffer.clear()
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            self._file_bytes += written
            if sync:
                os.fsync(fd)
                self._unsynced = 0
        except OSError as error:
            self._failure = error
            raise

    def _rotate(self) -> None:
        fd = self._check_open()  # called by `_append` on an open file: this never raises
        self._commit(close_body(self._index, self._time, continues=True))
        self._write_out(sync=True)
        os.close(fd)
        self._fd = None
        self._file_number += 1
        try:
            self._open_file()
        except (OSError, AuditLogError) as error:
            self._failure = error
            raise

    def _open_file(self) -> None:
        """Create file k with its header, written and fsynced at once (with its folder) so it is never torn late."""
        path = rotated_path(self.path, self._file_number)
        header = encode_header(
            file_number=self._file_number,
            first_index=self._index,
            artifact=self._artifact,
            previous=self._chain,
            input_names=self.input_names,
            metric_names=self.metric_names,
        )
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise AuditLogError(
                f"{path} exists; an audit log is never overwritten: choose a new path or move the old log away"
            ) from None
        self._file_bytes = 0
        self._buffer += header
        self._write_out(sync=True)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        self._chain = header[-32:]
