"""The audit log: exact round trips, every planted change found at its index, torn tails, rotation, crashes, threads.

The oracles: what was written (round trip, bit for bit), and the byte
surgery itself (the index of the frame that was changed, removed,
inserted or moved, the number of whole frames before a cut).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import AuditLogError, CertfsmError
from certfsm.runtime._audit import AuditWriter, rotated_path
from certfsm.runtime._audit_format import (
    REFUSAL_TEXT_BYTES,
    CloseRecord,
    FrameLayout,
    LoggedState,
    OverrideRecord,
    RefusalRecord,
    StepRecord,
    SwapRecord,
    encode_header,
)
from certfsm.runtime._audit_read import export_jsonl, read_header, read_log, verify_log

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"
SHA_A, SHA_B, SHA_C = "a1" * 32, "b2" * 32, "c3" * 32
INPUTS = ("util", "bandwidth", "temperature")
METRICS = ("latency_ms", "power_w")
NAN = math.nan


def step_args(k: int) -> tuple:
    """Distinct, deterministic arguments of the k-th step (reading[0] carries k, so order is visible)."""
    return (
        k * 0.001,
        (float(k), NAN if k % 5 == 0 else 0.25, -1.5),
        {"latency_ms": 2.0 + k} if k % 2 else {},
        -1 if k % 7 == 0 else k % 40,
        k % 4,
        (k % 4) + 8,
        k % 12,
        LoggedState(k % 4, -1, 0, k % 3),
        k % 6 != 0,
        None if k % 3 else k % 4,
    )


def write_steps(path: Path, n: int, **options) -> None:
    with AuditWriter(path, SHA_A, INPUTS, METRICS, fsync_every=options.pop("fsync_every", 0), **options) as writer:
        for k in range(n):
            writer.append_step(*step_args(k))


def split_frames(path: Path) -> tuple[bytes, list[bytes]]:
    """A file cut into its header and its frames."""
    data, header = path.read_bytes(), read_header(path)
    sizes = FrameLayout(header.input_names, header.metric_names, header.format_version).frame_sizes
    frames, pos = [], header.size
    while pos < len(data):
        frames.append(data[pos : pos + sizes[data[pos]]])
        pos += sizes[data[pos]]
    return data[: header.size], frames


def bits(value: float) -> bytes:
    return struct.pack("<d", value)


def assert_step_equal(record: StepRecord, args: tuple, fixed: bool = False) -> None:
    """Bit-exact comparison of a read step record with the arguments that wrote it (`fixed`: by append_step_fixed,
    whose integers come back as the same integers, saturated at the i64 bounds)."""
    time, reading, metrics, cell, token, code, reason, state, sla_ok, override = args
    if not isinstance(metrics, dict):
        metrics = dict(zip(METRICS, metrics))
    assert bits(record.time) == bits(time)
    assert record.fixed == fixed
    if fixed:
        assert list(record.reading) == [min(max(v, -(2**63)), 2**63 - 1) for v in reading]
        assert all(type(v) is int for v in record.reading)
    else:
        assert [bits(v) for v in record.reading] == [bits(NAN if v is None else v) for v in reading]
    assert list(record.metrics) == list(METRICS)
    assert [bits(v) for v in record.metrics.values()] == [
        bits(NAN if metrics.get(name) is None else metrics[name]) for name in METRICS
    ]
    assert (record.cell, record.token, record.code, record.reason, record.sla_ok, record.override) == (
        cell,
        token,
        code,
        reason,
        sla_ok,
        override,
    )
    assert record.state == tuple(state)


# ------------------------------------------------------------- round trip

any_float = st.floats(allow_nan=True, allow_infinity=True)
steps = st.tuples(
    any_float,
    st.lists(any_float | st.none(), min_size=3, max_size=3),
    st.lists(any_float | st.none(), min_size=2, max_size=2),
    st.integers(-1, 2**31 - 1),
    st.integers(0, 15),
    st.integers(0, 15),
    st.integers(0, 15),
    st.builds(
        LoggedState, st.integers(0, 15), st.integers(-1, 15), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)
    ),
    st.booleans(),
    st.none() | st.integers(-(2**31), 2**31 - 1),
)
fixed_steps = steps.flatmap(
    lambda args: st.lists(st.integers(-(2**70), 2**70) | st.integers(-(2**16), 2**16), min_size=3, max_size=3).map(
        lambda ints: (args[0], ints, *args[2:])
    )
)
events = st.lists(
    st.one_of(
        steps.map(lambda args: ("step", args)),
        fixed_steps.map(lambda args: ("fixed", args)),
        st.tuples(any_float, st.text(max_size=1200), st.none() | st.sampled_from([SHA_B, SHA_C])).map(
            lambda args: ("refusal", args)
        ),
        st.tuples(any_float, st.none() | st.integers(0, 15), st.none() | st.integers(0, 2**64 - 1)).map(
            lambda args: ("override", args)
        ),
        st.tuples(any_float, st.sampled_from([SHA_A, SHA_B, SHA_C])).map(lambda args: ("swap", args)),
    ),
    max_size=40,
)


@settings(max_examples=examples(25), deadline=None)
@given(events=events, rotate_bytes=st.none() | st.integers(200, 1500), fsync_every=st.sampled_from([0, 1, 7]))
def test_round_trip_is_bit_exact_across_rotation(events, rotate_bytes, fsync_every):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.audit"
        in_force = SHA_A
        with AuditWriter(path, SHA_A, INPUTS, METRICS, fsync_every=fsync_every, rotate_bytes=rotate_bytes) as writer:
            for kind, args in events:
                if kind == "step":
                    writer.append_step(*args)
                elif kind == "fixed":
                    writer.append_step_fixed(*args)
                elif kind == "refusal":
                    writer.append_refusal(*args)
                elif kind == "override":
                    writer.append_override(*args)
                else:
                    writer.append_swap(args[0], in_force, args[1], LoggedState(1, 2, 3, 4))
                    in_force = args[1]
        head = writer.head
        records = list(read_log(path))
        verification = verify_log(path)
        assert verification.ok and verification.closed and verification.head == head
        assert verification.records == len(records) == records[-1].index + 1
        assert [r.index for r in records] == list(range(len(records)))
        assert len(verification.files) == sum(isinstance(r, CloseRecord) for r in records)
        assert [r.continues for r in records if isinstance(r, CloseRecord)] == [True] * (
            len(verification.files) - 1
        ) + [False]
        logged = [r for r in records if not isinstance(r, CloseRecord)]
        assert len(logged) == len(events)
        in_force = SHA_A
        for record, (kind, args) in zip(logged, events):
            if kind in ("step", "fixed"):
                assert isinstance(record, StepRecord)
                assert_step_equal(record, args, fixed=kind == "fixed")
            elif kind == "refusal":
                assert isinstance(record, RefusalRecord)
                assert (bits(record.time), record.artifact_sha256, record.refused_sha256) == (
                    bits(args[0]),
                    in_force,
                    args[2],
                )
                raw, kept = args[1].encode("utf-8"), record.reason.encode("utf-8")
                assert (
                    kept == raw
                    if len(raw) <= REFUSAL_TEXT_BYTES
                    else (raw.startswith(kept) and REFUSAL_TEXT_BYTES - 4 < len(kept) <= REFUSAL_TEXT_BYTES)
                )
            elif kind == "override":
                assert isinstance(record, OverrideRecord)
                assert (bits(record.time), record.token, record.cycles) == (bits(args[0]), args[1], args[2])
            else:
                assert isinstance(record, SwapRecord)
                assert (record.old_sha256, record.new_sha256, record.state) == (in_force, args[1], (1, 2, 3, 4))
                in_force = args[1]
        assert read_header(path).artifact_sha256 == SHA_A


def test_header_names_the_artifact_inputs_metrics_and_version(tmp_path):
    write_steps(tmp_path / "log", 3)
    header = read_header(tmp_path / "log")
    assert (header.format_version, header.artifact_sha256, header.input_names, header.metric_names) == (
        2,
        SHA_A,
        INPUTS,
        METRICS,
    )
    assert (header.file_number, header.first_index, header.previous_chain) == (0, 0, "00" * 32)


def test_export_is_strict_json_lines(tmp_path):
    write_steps(tmp_path / "log", 12)
    out = tmp_path / "log.jsonl"
    verification = export_jsonl(tmp_path / "log", out)

    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    lines = [json.loads(line, parse_constant=refuse) for line in out.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["header"] + ["step"] * 12 + ["close", "verification"]
    assert lines[-1]["ok"] is True and verification.ok and lines[-1]["head"] == verification.head
    first = lines[1]
    assert first["reading"] == {"util": 0.0, "bandwidth": None, "temperature": -1.5}
    assert first["metrics"] == {"latency_ms": None, "power_w": None}
    assert first["state"] == {"current": 0, "candidate": -1, "count": 0, "cooldown": 0}
    assert lines[2]["metrics"]["latency_ms"] == 3.0 and lines[1]["override"] == 0


# ------------------------------------------------------------- planted changes

SIZES = st.integers(2, 25)


def tampered(folder: str, n: int, change) -> tuple:
    """Write n steps, apply `change` to their frames, rewrite; return the verification and read_log's error."""
    path = Path(folder) / "log"
    write_steps(path, n)
    header, frames = split_frames(path)
    path.write_bytes(header + b"".join(change(frames)))
    verification = verify_log(path)
    with pytest.raises(AuditLogError) as error:
        list(read_log(path))
    return verification, str(error.value)


def assert_found_at(verification, error: str, index: int) -> None:
    assert not verification.ok and not verification.torn
    assert (verification.first_bad, verification.records) == (index, index)
    assert f": record {index} is bad: " in error and "\n" not in error


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data(), n=SIZES)
def test_a_changed_byte_is_found_at_its_record(data, n):
    index = data.draw(st.integers(0, n - 1))
    offset = data.draw(st.integers(1, 200))
    flip = data.draw(st.integers(1, 255))

    def change(frames):
        frame = bytearray(frames[index])
        frame[offset % len(frame)] ^= flip
        return frames[:index] + [bytes(frame)] + frames[index + 1 :]

    with tempfile.TemporaryDirectory() as folder:
        assert_found_at(*tampered(folder, n, change), index)


@settings(max_examples=examples(15), deadline=None)
@given(data=st.data(), n=SIZES)
def test_a_removed_record_is_found_where_it_was(data, n):
    index = data.draw(st.integers(0, n - 1))
    with tempfile.TemporaryDirectory() as folder:
        verification, error = tampered(folder, n, lambda frames: frames[:index] + frames[index + 1 :])
        assert_found_at(verification, error, index)
        assert "removed, inserted or reordered" in verification.reason


@settings(max_examples=examples(15), deadline=None)
@given(data=st.data(), n=SIZES)
def test_an_inserted_record_is_found_where_it_was_put(data, n):
    index = data.draw(st.integers(0, n))
    copied = data.draw(st.integers(0, n - 1).filter(lambda j: j != index))
    with tempfile.TemporaryDirectory() as folder:
        verification, error = tampered(folder, n, lambda frames: frames[:index] + [frames[copied]] + frames[index:])
        assert_found_at(verification, error, index)


@settings(max_examples=examples(15), deadline=None)
@given(data=st.data(), n=SIZES)
def test_two_swapped_records_are_found_at_the_first(data, n):
    first = data.draw(st.integers(0, n - 2))
    second = data.draw(st.integers(first + 1, n - 1))

    def change(frames):
        frames = list(frames)
        frames[first], frames[second] = frames[second], frames[first]
        return frames

    with tempfile.TemporaryDirectory() as folder:
        assert_found_at(*tampered(folder, n, change), first)


def test_a_forged_record_chained_correctly_shows_at_the_next_record(tmp_path):
    """The limit of an unkeyed chain: a forger who computes a valid frame at i is caught at i + 1, where the
    genuine record no longer follows; a forger who rewrites the whole suffix changes the head hash only."""
    path = tmp_path / "log"
    write_steps(path, 6)
    header, frames = split_frames(path)
    records = list(read_log(path))
    previous = bytes.fromhex(records[2].chain)
    body = frames[3][:-32]
    forged = bytearray(body)
    forged[-1] ^= 1
    forged = bytes(forged) + hashlib.sha256(previous + bytes(forged)).digest()
    path.write_bytes(header + b"".join(frames[:3] + [forged] + frames[3:]))
    verification = verify_log(path)
    assert (verification.first_bad, verification.records) == (4, 4)


# ------------------------------------------------------------- torn tails


@settings(max_examples=examples(25), deadline=None)
@given(data=st.data(), n=st.integers(0, 12))
def test_a_cut_anywhere_is_a_torn_tail_and_the_prefix_verifies_and_reads(data, n):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log"
        write_steps(path, n)
        whole = path.read_bytes()
        header, frames = split_frames(path)
        cut = data.draw(st.integers(0, len(whole)))
        path.write_bytes(whole[:cut])
        verification = verify_log(path)
        if cut < len(header):
            assert verification.torn and verification.records == 0 and "header is torn" in verification.reason
            assert list(read_log(path)) == []
            return
        whole_frames = sum(1 for k in range(len(frames) + 1) if len(header) + sum(map(len, frames[:k])) <= cut) - 1
        on_boundary = len(header) + sum(map(len, frames[:whole_frames])) == cut
        assert verification.records == whole_frames
        assert verification.ok == on_boundary and verification.torn == (not on_boundary)
        assert verification.closed == (cut == len(whole))
        if not on_boundary:
            assert verification.first_bad == whole_frames and "torn tail at record" in verification.describe()
        read = list(read_log(path))
        assert len(read) == whole_frames
        for k, record in enumerate(read[:n]):
            assert_step_equal(record, step_args(k))


def test_a_zero_filled_tail_is_torn(tmp_path):
    """What a power cut can leave: the file grew but its last blocks were never written."""
    path = tmp_path / "log"
    write_steps(path, 5)
    header, frames = split_frames(path)
    path.write_bytes(header + b"".join(frames[:5]) + bytes(4096))
    verification = verify_log(path)
    assert verification.torn and (verification.first_bad, verification.records) == (5, 5)
    assert "4096 zero bytes" in verification.reason
    assert len(list(read_log(path))) == 5


def test_a_torn_header_holds_no_records(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"CFSMAU")
    verification = verify_log(path)
    assert verification.torn and verification.records == 0 and "header is torn" in verification.reason
    assert list(read_log(path)) == []
    with pytest.raises(
        AuditLogError,
        match=r"the header is torn \(the writer stopped while creating the file\); "
        r"the log holds no records$",
    ):
        read_header(path)


# ------------------------------------------------------------- rotation


def rotated(path: Path, n: int = 40) -> list[Path]:
    write_steps(path, n, rotate_bytes=600)
    files = verify_log(path).files
    assert len(files) >= 4
    return [Path(f) for f in files]


def first_index(path: Path) -> int:
    return read_header(path).first_index


def test_rotation_keeps_one_chain_and_is_followed_from_the_first_file_or_the_folder(tmp_path):
    files = rotated(tmp_path / "run.audit")
    assert [f.name for f in files] == ["run.audit"] + [f"run.audit.{k}" for k in range(1, len(files))]
    from_file, from_folder = verify_log(tmp_path / "run.audit"), verify_log(tmp_path)
    assert from_file == from_folder and from_file.ok and from_file.closed
    steps = [r for r in read_log(tmp_path) if isinstance(r, StepRecord)]
    assert [r.reading[0] for r in steps] == [float(k) for k in range(40)]
    with pytest.raises(AuditLogError, match=r"this is file 2 of a rotated log; give the path of its first file$"):
        verify_log(files[2])


def test_a_file_from_another_log_breaks_the_link_at_its_first_record(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = rotated(tmp_path / "a" / "log")
    with AuditWriter(tmp_path / "b" / "log", SHA_A, INPUTS, METRICS, rotate_bytes=600) as other:
        for k in range(40):
            args = list(step_args(k))
            args[0] += 1.0 if k == 1 else 0.0
            other.append_step(*args)
    files[2].write_bytes(rotated_path(tmp_path / "b" / "log", 2).read_bytes())
    verification = verify_log(files[0])
    assert (verification.first_bad, verification.records) == (first_index(files[2]), first_index(files[2]))
    assert "names previous chain hash" in verification.reason and not verification.torn


def test_reordered_files_and_a_changed_close_record_are_found(tmp_path):
    files = rotated(tmp_path / "log")
    one, two = files[1].read_bytes(), files[2].read_bytes()
    starts = [first_index(f) for f in files]
    files[1].write_bytes(two)
    files[2].write_bytes(one)
    verification = verify_log(files[0])
    assert verification.first_bad == starts[1] and "the header says file 2, expected file 1" in verification.reason
    files[2].write_bytes(two)
    data = bytearray(one)
    data[-40] ^= 0xFF  # inside the close record's body
    files[1].write_bytes(bytes(data))
    verification = verify_log(files[0])
    assert verification.first_bad == starts[2] - 1 and "close record does not match" in verification.reason


def test_a_corrupt_header_in_a_later_file_is_reported_at_its_first_record(tmp_path):
    files = rotated(tmp_path / "log")
    start = first_index(files[3])
    data = bytearray(files[3].read_bytes())
    data[95] ^= 1
    files[3].write_bytes(bytes(data))
    verification = verify_log(files[0])
    assert (verification.first_bad, verification.torn) == (start, False)
    assert "corrupt audit log header" in verification.reason


def test_a_missing_last_file_is_torn_a_missing_middle_file_is_bad(tmp_path):
    files = rotated(tmp_path / "log")
    second = first_index(files[1])
    last = files[-1].read_bytes()
    files[-1].unlink()
    verification = verify_log(files[0])
    assert verification.torn and "which is missing" in verification.reason
    files[-1].write_bytes(last)
    files[1].unlink()
    verification = verify_log(files[0])
    assert not verification.torn and verification.first_bad == verification.records == second
    assert f"continues in {files[1]}, which is missing while {files[2]} exists" in verification.reason


def test_a_log_closed_then_followed_by_a_file_is_bad(tmp_path):
    write_steps(tmp_path / "log", 3)
    (tmp_path / "other").mkdir()
    write_steps(tmp_path / "other" / "log", 3, rotate_bytes=200)
    rotated_path(tmp_path / "log", 1).write_bytes(rotated_path(tmp_path / "other" / "log", 1).read_bytes())
    verification = verify_log(tmp_path / "log")
    assert verification.first_bad == 4 and "follows a log that was closed at record 3" in verification.reason


# ------------------------------------------------------------- crashes

CHILD = """
import sys
from certfsm.runtime._audit import AuditWriter
from certfsm.runtime._audit_format import LoggedState
writer = AuditWriter(sys.argv[1], "a1" * 32, ["util", "bandwidth", "temperature"], ["latency_ms", "power_w"],
                     fsync_every=int(sys.argv[2]), rotate_bytes=int(sys.argv[3]) or None)
k = 0
while True:
    writer.append_step(k * 0.001, (float(k), 0.5, -1.5), {"power_w": 1.0}, k % 40, k % 4, k % 4, 0,
                       LoggedState(k % 4, -1, 0, 0), True)
    print(k, flush=True)
    k += 1
"""


def kill_writer(path: Path, fsync_every: int, rotate_bytes: int, after: int) -> int:
    """Run a writer in a child, SIGKILL it once it reported `after` appends; return how many appends returned."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(fsync_every), str(rotate_bytes)], stdout=subprocess.PIPE, text=True
    )
    reported = 0
    for _ in child.stdout:
        reported += 1
        if reported >= after:
            break
    child.send_signal(signal.SIGKILL)
    reported += sum(1 for line in child.stdout if line.endswith("\n"))
    child.wait()
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return reported


@pytest.mark.parametrize("after, rotate_bytes", [(1, 0), (57, 0), pytest.param(300, 4000, marks=pytest.mark.slow)])
def test_sigkill_loses_no_committed_record_when_every_record_is_fsynced(tmp_path, after, rotate_bytes):
    path = tmp_path / "log"
    committed = kill_writer(path, fsync_every=1, rotate_bytes=rotate_bytes, after=after)
    verification = verify_log(path)
    assert verification.ok or verification.torn
    assert not verification.closed
    steps = [r for r in read_log(path) if isinstance(r, StepRecord)]
    assert len(steps) >= committed
    assert [r.reading[0] for r in steps] == [float(k) for k in range(len(steps))]


def test_sigkill_with_buffered_records_leaves_a_verifying_prefix(tmp_path):
    path = tmp_path / "log"
    kill_writer(path, fsync_every=1000, rotate_bytes=20000, after=3000)
    verification = verify_log(path)
    assert verification.ok or verification.torn
    steps = [r for r in read_log(path) if isinstance(r, StepRecord)]
    assert len(steps) >= 2000
    assert [r.reading[0] for r in steps] == [float(k) for k in range(len(steps))]


# ------------------------------------------------------------- threads


@pytest.mark.parametrize("rotate_bytes", [None, 5000])
def test_appends_from_several_threads_keep_the_chain(tmp_path, rotate_bytes):
    threads, per_thread = 4, 400
    barrier = threading.Barrier(threads)

    def worker(writer, number):
        barrier.wait()
        for k in range(per_thread):
            writer.append_step(float(k), (float(number), float(k), 0.0), (), 0, 0, 0, 0, LoggedState(0, -1, 0, 0), True)
            if k % 50 == 0:
                writer.append_override(float(k), number)

    with AuditWriter(
        tmp_path / "log", SHA_A, INPUTS, METRICS, fsync_every=16, rotate_bytes=rotate_bytes, buffer_bytes=256
    ) as writer:
        workers = [threading.Thread(target=worker, args=(writer, n)) for n in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
    verification = verify_log(tmp_path / "log")
    assert verification.ok and verification.closed
    steps = [r for r in read_log(tmp_path / "log") if isinstance(r, StepRecord)]
    for number in range(threads):
        assert [r.reading[1] for r in steps if r.reading[0] == number] == [float(k) for k in range(per_thread)]
    assert verification.records == threads * (per_thread + per_thread // 50) + len(verification.files)


# ------------------------------------------------------------- refusals


def with_version(version: int):
    """Damage: rewrite the header with another format version and a valid digest, so only the version is wrong."""

    def damage(path: Path) -> None:
        _, frames = split_frames(path)
        header = bytearray(
            encode_header(
                file_number=0,
                first_index=0,
                artifact=bytes.fromhex(SHA_A),
                previous=bytes(32),
                input_names=INPUTS,
                metric_names=METRICS,
            )
        )
        struct.pack_into("<H", header, 8, version)
        header[-32:] = hashlib.sha256(header[:-32]).digest()
        path.write_bytes(bytes(header) + b"".join(frames))

    return damage


def corrupt_name(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[94] ^= 0x20
    path.write_bytes(bytes(data))


BAD_LOGS = [
    (
        with_version(3),
        r"audit log format version=3, this certfsm reads versions 1, 2; "
        r"read it with the certfsm that wrote it",
    ),
    (corrupt_name, r"corrupt audit log header \(its SHA-256 does not match its bytes\)"),
    (
        lambda p: p.write_bytes(b'{"kind": "header"}\n' * 10),
        r"not a certfsm audit log \(no b'CFSMAUDT' magic\); "
        r"give the path of an audit log",
    ),
]


@pytest.mark.parametrize("damage, message", BAD_LOGS)
@pytest.mark.parametrize(
    "reader", [verify_log, lambda p: list(read_log(p)), read_header, lambda p: export_jsonl(p, os.devnull)]
)
def test_a_bad_first_header_is_refused_in_one_line(tmp_path, damage, message, reader):
    path = tmp_path / "log"
    write_steps(path, 3)
    damage(path)
    with pytest.raises(AuditLogError, match="^" + re.escape(str(path)) + ": " + message + "$") as error:
        reader(path)
    assert isinstance(error.value, CertfsmError) and isinstance(error.value, ValueError)


def test_missing_log_and_ambiguous_folder_are_refused(tmp_path):
    with pytest.raises(AuditLogError, match=r"no such audit log; give the path of the log's first file or of its"):
        verify_log(tmp_path / "nothing")
    write_steps(tmp_path / "one", 1)
    write_steps(tmp_path / "two", 1)
    with pytest.raises(AuditLogError, match=r"folder holds 2 audit logs \['one', 'two'\], expected 1"):
        verify_log(tmp_path)


def new_writer(path):
    return AuditWriter(path, SHA_A, INPUTS, METRICS)


BAD_APPENDS = [
    (
        lambda w: w.append_step(0.0, (1.0, 2.0), {}, 0, 0, 0, 0, LoggedState(0, -1, 0, 0), True),
        AuditLogError,
        r"append_step: reading has 2 values, the log names 3 inputs \['util', 'bandwidth', 'temperature'\]; "
        r"pass one value per input",
    ),
    (
        lambda w: w.append_step(0.0, (1.0, 2.0, 3.0), {"latency": 1.0}, 0, 0, 0, 0, LoggedState(0, -1, 0, 0), True),
        AuditLogError,
        r"append_step: metrics name \['latency'\], which the log's header does not .*",
    ),
    (
        lambda w: w.append_step(0.0, (1.0, "2", 3.0), {}, 0, 0, 0, 0, LoggedState(0, -1, 0, 0), True),
        TypeError,
        r"append_step: bandwidth='2' is not a number; pass a float, or None when missing",
    ),
    (
        lambda w: w.append_step(0.0, (1.0, 2.0, 3.0), {}, 0, 16 * 16, 0, 0, LoggedState(0, -1, 0, 0), True),
        AuditLogError,
        r"append_step: token=256 does not fit the log \(.*\); pass the machine's own values",
    ),
    (
        lambda w: w.append_step(0.0, (1.0, 2.0, 3.0), {}, 0, 0, 0, 0, (0, -1, 0, 0), True),
        AuditLogError,
        r"append_step: state.current=None does not fit the log \(.*\); pass the machine's own values",
    ),
    (
        lambda w: w.append_step("now", (1.0, 2.0, 3.0), {}, 0, 0, 0, 0, LoggedState(0, -1, 0, 0), True),
        TypeError,
        r"append_step: time='now' is not a number; pass seconds as a float",
    ),
    (
        lambda w: w.append_swap(0.0, SHA_B, SHA_C, LoggedState(0, -1, 0, 0)),
        AuditLogError,
        r"append_swap: old_sha256=b2b2.* is not the artifact in force \(a1a1.*\); pass the hash of the artifact being "
        r"replaced",
    ),
    (
        lambda w: w.append_override(0.0, 1, -5),
        AuditLogError,
        r"append_override: time=0.0 token=1 cycles=-5 do not fit the log \(.*\); pass seconds, a token index and a "
        r"count >= 0 or None",
    ),
]


@pytest.mark.parametrize("append, kind, message", BAD_APPENDS)
def test_a_bad_append_is_refused_and_logs_nothing(tmp_path, append, kind, message):
    with new_writer(tmp_path / "log") as writer:
        writer.append_step(*step_args(1))
        with pytest.raises(kind, match="^" + message + "$"):
            append(writer)
        writer.append_step(*step_args(2))
    verification = verify_log(tmp_path / "log")
    assert verification.ok and verification.records == 3


BAD_WRITERS = [
    (
        dict(artifact_sha256="abc"),
        r"artifact_sha256='abc' is not a SHA-256 in hex \(64 hex digits\); pass the "
        r"artifact's sha256",
    ),
    (
        dict(input_names=["a", "a"]),
        r"input_names=\['a', 'a'\] must be distinct non-empty strings; pass the spec's "
        r"names",
    ),
    (
        dict(fsync_every=-1),
        r"fsync_every=-1 must be an integer >= 0 \(1: every record, N: every N records, 0: on "
        r"close only\)",
    ),
    (dict(rotate_bytes=0), r"rotate_bytes=0 must be a positive integer or None \(no rotation\)"),
]


@pytest.mark.parametrize("change, message", BAD_WRITERS)
def test_bad_writer_arguments_are_refused(tmp_path, change, message):
    arguments = dict(path=tmp_path / "log", artifact_sha256=SHA_A, input_names=INPUTS, metric_names=METRICS)
    arguments.update(change)
    with pytest.raises(AuditLogError, match="^" + message + "$"):
        AuditWriter(**arguments)
    assert not (tmp_path / "log").exists()


def test_a_log_is_never_overwritten_nor_mixed_with_an_older_rotation(tmp_path):
    write_steps(tmp_path / "log", 1)
    with pytest.raises(AuditLogError, match=r"log exists; an audit log is never overwritten: choose a new path"):
        new_writer(tmp_path / "log")
    rotated_path(tmp_path / "fresh", 1).write_bytes(b"")
    with pytest.raises(AuditLogError, match=r"fresh.1 exists: .*fresh would mix with an older log"):
        new_writer(tmp_path / "fresh")


def test_a_closed_writer_refuses_appends(tmp_path):
    writer = new_writer(tmp_path / "log")
    writer.close()
    writer.close()
    with pytest.raises(AuditLogError, match=r"the audit log is closed; open a new AuditWriter to log more$"):
        writer.append_step(*step_args(0))


def test_the_audit_modules_import_only_the_standard_library():
    """The runtime's scalar path must run where numpy is absent: these modules may use only the standard
    library, the core's error classes and each other."""
    for module in sorted(RUNTIME.glob("_audit*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "certfsm" and not node.level:
                names = [f"certfsm.{alias.name}" for alias in node.names if not alias.name.endswith("Error")]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            else:
                continue
            for name in names:
                assert (
                    name.split(".")[0] in sys.stdlib_module_names or name.startswith("._audit") or name == "__future__"
                ), f"{module.name} imports {name}"


def test_an_io_error_stops_the_writer_and_leaves_a_verifying_prefix(tmp_path, monkeypatch):
    writer = AuditWriter(tmp_path / "log", SHA_A, INPUTS, METRICS, fsync_every=1)
    for k in range(3):
        writer.append_step(*step_args(k))
    real_write, full = os.write, OSError(28, "No space left on device")

    def write(fd, data):
        if fd == writer._fd:
            raise full
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(OSError, match="No space left on device"):
        writer.append_step(*step_args(3))
    with pytest.raises(
        AuditLogError,
        match=r"the writer stopped after an I/O error \(.*No space left on device\); "
        r"verify the log and start a new one$",
    ):
        writer.append_step(*step_args(4))
    writer.close()
    verification = verify_log(tmp_path / "log")
    assert verification.ok and verification.records == 3 and not verification.closed


def test_a_failed_background_fsync_stops_the_writer(tmp_path, monkeypatch):
    """Under fsync_every=N the fsync runs in a thread; its error surfaces at the next hand-off, not never."""
    writer = AuditWriter(tmp_path / "log", SHA_A, INPUTS, METRICS, fsync_every=2)
    real_fsync = os.fsync

    def fsync(fd):
        if fd == writer._fd:
            raise OSError(5, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output error"):
        for k in range(6):
            writer.append_step(*step_args(k))
    with pytest.raises(AuditLogError, match=r"the writer stopped after an I/O error"):
        writer.append_step(*step_args(9))
    writer.close()
    monkeypatch.undo()
    assert verify_log(tmp_path / "log").ok


def test_a_log_is_written_and_verified_with_numpy_and_the_solvers_blocked(tmp_path):
    """What an embedded target without numpy can do: write, verify and read a log."""
    script = (
        "import sys\n"
        "for name in ('numpy', 'onnx', 'onnxruntime', 'z3', 'maraboupy', 'jsonschema', 'matplotlib'):\n"
        "    sys.modules[name] = None\n"
        "from certfsm.runtime._audit import AuditWriter\n"
        "from certfsm.runtime._audit_format import LoggedState\n"
        "from certfsm.runtime._audit_read import read_log, verify_log\n"
        "with AuditWriter(sys.argv[1], 'a1' * 32, ['x'], ['m']) as writer:\n"
        "    writer.append_step(0.0, [1.0], {'m': 2.0}, 3, 1, 1, 0, LoggedState(1, -1, 0, 0), True)\n"
        "assert verify_log(sys.argv[1]).ok and len(list(read_log(sys.argv[1]))) == 2\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "log")], check=True)
