"""Run certfsm on one VNN-LIB instance and hold its answer to the exact semantics.

Why: every soundness test asks the same two questions of a run, so they
live here once. (1) Is the answer wrong? Only ``sat`` where the exact
answer is ``unsat``, or ``unsat`` where it is ``sat``; ``unknown`` and
``timeout`` never are. (2) Does a ``sat`` answer's witness lie in the exact
input box and reach the unsafe set exactly (strict atoms strict)? The
witness is judged as the float64 certfsm returned (through the API) or as
the decimal text it printed (through the CLI), each read exactly.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import soundness_oracle as oracle
from certfsm.verify import verify_vnnlib
from certfsm.verify._run import vnncomp_answer
from certfsm import VIOLATED
from certfsm.verify._engines import ENGINE_REGISTRY

ENGINES = tuple(ENGINE_REGISTRY)
"""Every registered engine: one that registers joins these suites with no change here."""
NEEDS_MARABOU = tuple(name for name, engine in ENGINE_REGISTRY.items() if "marabou" in engine.solvers)
HAS_MARABOU = importlib.util.find_spec("maraboupy") is not None
_WITNESS_ENTRY = re.compile(r"\(\s*X_(\d+)\s+([^\s()]+)\s*\)")


def engine_params() -> list:
    """ENGINES as pytest params; Marabou's are skipped, with the reason, where maraboupy is not installed."""
    missing = pytest.mark.skipif(not HAS_MARABOU, reason="engine needs maraboupy, which is not installed")
    return [pytest.param(e, marks=missing if e in NEEDS_MARABOU else (), id=e) for e in ENGINES]


def is_wrong(answer: str, expected: str) -> bool:
    return {answer, expected} == {"sat", "unsat"}


def assert_exact_violation(onnx_path, vnnlib_path, point, what: str) -> None:
    """`point` lies in the exact box and reaches the unsafe set exactly; otherwise fail naming what it misses."""
    missed = oracle.failing_asserts(onnx_path, vnnlib_path, point)
    if missed:
        outputs = [float(y) for y in oracle.exact_outputs(onnx_path, point)]
        pytest.fail(
            f"{what}: the witness {[str(oracle.rational(v)) for v in point]} is no exact violation; "
            f"it makes false {missed} (exact outputs ~ {outputs})"
        )


def check_api(onnx_path: Path, vnnlib_path: Path, expected: str, engine: str, timeout: float) -> str:
    """Run `verify_vnnlib` with one engine; fail on a wrong answer or an inexact witness; return the answer."""
    run = verify_vnnlib(onnx_path, vnnlib_path, engine=engine, timeout=timeout, jobs=1)
    answer = vnncomp_answer(run.results)
    what = f"{vnnlib_path.stem} engine={engine}: answered {answer}, exact answer {expected}"
    if is_wrong(answer, expected):
        reasons = "; ".join(f"{r.engine}: {r.verdict} {r.reason}".strip() for r in run.results)
        pytest.fail(f"WRONG {what} ({reasons})")
    if answer == "sat":
        witness = next(r for r in run.results if r.verdict == VIOLATED).counterexample
        assert_exact_violation(onnx_path, vnnlib_path, [float(v) for v in witness.reshape(-1)], what)
    return answer


def check_cli(
    onnx_path: Path, vnnlib_path: Path, expected: str, out: Path, timeout: float, engine: str = "auto"
) -> str:
    """Run ``certfsm vnnlib ... --out FILE``; judge the written answer and its printed witness, read as exact decimals."""
    command = [
        sys.executable,
        "-m",
        "certfsm.cli",
        "vnnlib",
        str(onnx_path),
        str(vnnlib_path),
        "--out",
        str(out),
        "--timeout",
        str(timeout),
        "--engine",
        engine,
        "--jobs",
        "1",
        "--no-progress",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 120)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    text = out.read_text()
    answer = text.split()[0]
    what = f"CLI {vnnlib_path.stem} engine={engine}: answered {answer}, exact answer {expected}"
    assert not is_wrong(answer, expected), f"WRONG {what}\n{text}"
    if answer == "sat":
        entries = sorted((int(i), Fraction(value)) for i, value in _WITNESS_ENTRY.findall(text))
        assert [i for i, _ in entries] == list(range(oracle.input_count(oracle.load_model(onnx_path)))), text
        assert_exact_violation(onnx_path, vnnlib_path, [value for _, value in entries], what)
    return answer
