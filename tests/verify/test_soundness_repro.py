"""The soundness-repro benchmark as regression tests: every case, every engine, the API and the CLI.

Why: each of these instances once drew a wrong answer from ``certfsm
vnnlib`` (see ../shared/benchmarks/soundness-repro/README.md); none may
ever again be answered ``sat`` where the exact answer is ``unsat`` or the
reverse, and a ``sat`` answer's witness must violate the property exactly.
The benchmark is read in place ($CERTFSM_SOUNDNESS_REPRO, else
../shared/benchmarks/soundness-repro beside the checkout) and the tests
skip with the reason where it is absent. The first case of each family
(as the README's table names them) stays in the fast set, with the
default engine (and with every engine for the first family); the rest
are slow.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import soundness_oracle as oracle
from soundness_judge import check_api, check_cli, engine_params

REPRO = Path(
    os.environ.get("CERTFSM_SOUNDNESS_REPRO")
    or Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "soundness-repro"
)
_ROW = re.compile(r"^\|\s*(\w[\w.-]*)\s*\|\s*(\w[\w-]*)\s*\|")


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    onnx: Path
    vnnlib: Path
    timeout: float
    expected: str


def _families(readme: Path) -> dict[str, str]:
    """Case name -> family, from the README's table (| case | family | ...)."""
    if not readme.is_file():
        return {}
    return dict(m.groups() for line in readme.read_text().splitlines() if (m := _ROW.match(line)))


def _cases() -> list[Case]:
    if not (REPRO / "instances.csv").is_file():
        return []
    families = _families(REPRO / "README.md")
    with open(REPRO / "instances.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [
        Case(
            Path(row["vnnlib"]).stem,
            families.get(Path(row["vnnlib"]).stem, "unlisted"),
            REPRO / row["onnx"],
            REPRO / row["vnnlib"],
            float(row["timeout_s"]),
            row["expected"].strip(),
        )
        for row in rows
    ]


def _params(cases: list[Case], fast: set[str]) -> list:
    if not cases:
        return [
            pytest.param(
                None,
                id="absent",
                marks=pytest.mark.skip(
                    reason=f"soundness-repro benchmark not found at {REPRO}; set CERTFSM_SOUNDNESS_REPRO to its folder"
                ),
            )
        ]
    return [pytest.param(c, id=c.name, marks=() if c.name in fast else pytest.mark.slow) for c in cases]


CASES = _cases()
REPRESENTATIVES = {
    family: next(c for c in CASES if c.family == family) for family in dict.fromkeys(c.family for c in CASES)
}
"""The first case of each family, in the benchmark's order."""
ALL = _params(CASES, {c.name for c in REPRESENTATIVES.values()})
ONE_PER_FAMILY = _params(list(REPRESENTATIVES.values()), set())


@pytest.mark.parametrize("case", ALL)
def test_oracle_agrees_with_the_recorded_answer(case):
    """The exact oracle and the benchmark's `expected` column are two independent records of the truth."""
    assert oracle.exact_answer(case.onnx, case.vnnlib) == case.expected


def _case_engine_params() -> list:
    """Every case with every engine; the fast set keeps the default engine on each family's first case and
    every engine on the first family's first case (each engine's own soundness is also in the conformance suite)."""
    first = next(iter(REPRESENTATIVES.values()), None)
    params = []
    for c in ALL:
        for e in engine_params():
            fast = c.values[0] in REPRESENTATIVES.values() and (e.values[0] == "auto" or c.values[0] is first)
            marks = [*c.marks, *e.marks, *(() if fast else (pytest.mark.slow,))]
            params.append(pytest.param(c.values[0], e.values[0], marks=marks, id=f"{c.id}-{e.id}"))
    return params


@pytest.mark.slow
@pytest.mark.parametrize("case, engine", _case_engine_params())
def test_api_answer_is_never_wrong_and_its_witness_is_exact(case, engine):
    """verify_vnnlib answers unsat/sat only where that is the exact answer; a sat witness violates exactly."""
    check_api(case.onnx, case.vnnlib, case.expected, engine, min(case.timeout, _ENGINE_SECONDS.get(engine, 15.0)))


# bounds alone cannot close a strict tie or a needle: its unknown after 0.2 s is as final as after 30 s.
_ENGINE_SECONDS = {"bounds": 0.2}


@pytest.mark.slow
@pytest.mark.parametrize("case", ONE_PER_FAMILY)
def test_cli_answer_is_never_wrong_and_its_printed_witness_is_exact(case, tmp_path):
    """The result file of ``certfsm vnnlib --out``: right answer, and printed decimals that violate exactly."""
    check_cli(case.onnx, case.vnnlib, case.expected, tmp_path / "result.txt", case.timeout)
