"""The parsers' contract under fuzzing: a valid result or one line of the right CertfsmError, in bounded time.

Each parse runs in a worker process under a time limit and a memory cap:
a hang or a runaway allocation is reported as a failure of the parser and
never stalls or swaps the test run. The worker comes from a fork server
(forking the test process itself is unsafe once a solver or onnxruntime
has started threads) and imports the parser once, before any timing. `mutated` builds the inputs: valid
files with byte flips, insertions, deletions, duplicated spans and deep
nesting, the damage that once crashed or hung the parsers
(../shared/benchmarks/bad-inputs).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import re
import resource
import traceback
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

TIME_LIMIT = 5.0
"""Seconds one parse may take; the slowest refusals measured take about 2 s."""

MEMORY_LIMIT = 3 * 1024**3
"""Bytes of address space of the worker: a parse that tries to allocate more fails with MemoryError, a crash."""

FAST = settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""The fast suite's share: a few fixed examples, the same on every run."""

CAMPAIGN = int(os.environ.get("CERTFSM_FUZZ_EXAMPLES", "500"))
"""Mutated files per parser in the full suite. Derandomized, so each run re-reads the same files: a regression
test of the parsers, not a hunt; a longer hunt raises it (CERTFSM_FUZZ_EXAMPLES=20000) and keeps what it checks."""

SLOW = settings(max_examples=CAMPAIGN, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""The slow suite's campaign (still derandomized, so a failure reproduces)."""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _import(module: str) -> None:
    importlib.import_module(module)


def _parse(target: str, path: str) -> tuple[str, str]:
    """("ok", type of the result), (error class, message) for a CertfsmError, or ("crash", the traceback)."""
    from certfsm import CertfsmError

    module, _, name = target.rpartition(".")
    try:
        result = getattr(importlib.import_module(module), name)(path)
    except CertfsmError as error:
        return type(error).__name__, str(error)
    except Exception:  # noqa: BLE001 - any other exception is exactly what the contract forbids
        return "crash", traceback.format_exc()
    return "ok", type(result).__name__


class Parser:
    """Calls `target` ("module.function", taking a path) in a reusable worker process, with TIME_LIMIT per call."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._pool = None

    def __call__(self, path: Path) -> tuple[str, str]:
        if self._pool is None:
            self._pool = multiprocessing.get_context("forkserver").Pool(1, initializer=_limit_memory)
            self._pool.apply(_import, (self.target.rpartition(".")[0],))
        pending = self._pool.apply_async(_parse, (self.target, str(path)))
        try:
            return pending.get(TIME_LIMIT)
        except multiprocessing.TimeoutError:
            self.close()  # the worker is stuck; the next call starts a fresh one
            return "timeout", f"no answer within {TIME_LIMIT} s"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


def assert_contract(outcome: tuple[str, str], path: Path, error: type, result: str) -> None:
    """`outcome` is a `result` (a type name) or one line of `error` that starts with the file's path."""
    kind, detail = outcome
    if kind == "ok":
        assert detail == result, f"{path}: returned a {detail}, expected a {result}"
        return
    assert kind == error.__name__, f"{path}: expected {error.__name__} or a {result}, got {kind}:\n{detail}"
    assert "\n" not in detail, f"{path}: the message is not one line:\n{detail}"
    assert detail.startswith(str(path)), f"the message does not start with the file's path {path}: {detail}"


NUMBERS = st.one_of(
    st.sampled_from(
        [
            b"1e999999999",
            b"1e-999999999",
            b"2.941872e466329906",
            b"1e400",
            b"-1e400",
            b"1e-400",
            b"1e308",
            b"-1.7976931348623157e308",
            b"1.8e308",
            b"4.9e-324",
            b"1e-1100",
            b"1e1101",
            b"-0",
            b"0.",
            b".5",
            b"1e",
            b"--1",
            b"1.2.3",
            b"0x10",
            b"NaN",
            b"Infinity",
        ]
    ),
    st.integers(1, 6000).map(lambda n: b"9" * n),
    st.integers(1, 6000).map(lambda n: b"0." + b"0" * n + b"1"),
    st.tuples(st.integers(1, 20), st.integers(-(10**12), 10**12)).map(lambda t: b"3" * t[0] + b"e%d" % t[1]),
)
"""Numbers that once crashed or hung a parser, and their neighbours: long, huge, tiny, malformed."""

_NUMBER = re.compile(rb"[0-9][0-9.eE+-]*")
_PRINTABLE = st.integers(32, 126) | st.sampled_from([9, 10, 13])


def mutated(
    seeds: list[bytes], tokens: list[bytes], nestings: list[tuple[bytes, bytes]], is_text: bool = True
) -> st.SearchStrategy[bytes]:
    """One of `seeds` with 1 to 4 mutations.

    A mutation changes a byte (in a text format mostly into printable
    ASCII, so the damage reaches past the UTF-8 check), inserts random
    bytes or one of the format's `tokens` (once or repeated up to 5 000
    times), replaces a number with one of `NUMBERS` (text formats), deletes
    a span, copies a span elsewhere, or nests an (opening, closing) pair of
    `nestings` up to 10 000 levels deep (sometimes left unclosed).
    """
    kinds = ["flip", "insert", "token", "delete", "duplicate", "nest"] + (["number"] * 2 if is_text else [])

    @st.composite
    def build(draw) -> bytes:
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(kinds))
            at = draw(st.integers(0, len(data)))
            if kind == "flip" and data:
                position = min(at, len(data) - 1)
                if is_text and draw(st.integers(0, 9)):
                    data[position] = draw(_PRINTABLE)
                else:
                    data[position] ^= draw(st.integers(1, 255))
            elif kind == "number" and _NUMBER.search(data):
                numbers = list(_NUMBER.finditer(data))
                number = numbers[draw(st.integers(0, len(numbers) - 1))]
                data[number.start() : number.end()] = draw(NUMBERS)
            elif kind == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            elif kind == "token":
                data[at:at] = draw(st.sampled_from(tokens)) * draw(st.sampled_from([1, 1, 1, 2, 50, 5000]))
            elif kind == "delete":
                del data[at : at + draw(st.integers(1, 64))]
            elif kind == "duplicate":
                end = draw(st.integers(at, min(len(data), at + 4096)))
                to = draw(st.integers(0, len(data)))
                data[to:to] = data[at:end]
            elif kind == "nest":
                opening, closing = draw(st.sampled_from(nestings))
                depth = draw(st.sampled_from([10, 120, 3000, 10000]))
                data[at:at] = opening * depth + closing * depth * draw(st.sampled_from([0, 1, 1, 1]))
        return bytes(data)

    return build()


def parser_fixture(target: str):
    """A module-scoped pytest fixture `parse` running `target` in the worker (one per fuzz module)."""
    import pytest

    @pytest.fixture(scope="module")
    def parse():
        parser = Parser(target)
        yield parser
        parser.close()

    return parse


def check_bytes(parse, case: Path, data: bytes, error: type, result: str) -> None:
    """Write `data` to `case`, parse it in the worker and assert the contract (see `assert_contract`)."""
    case.write_bytes(data)
    assert_contract(parse(case), case, error, result)
