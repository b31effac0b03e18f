"""The writer and the loader state the artifact format independently, and a round trip holds them to each other.

Payloads are built from independent inputs (a spec, edges, a table, the
machine's parameters, a certificate), written by `artifact_payload` and
`write_artifact`, loaded by `load_artifact`, and every decoded typed value
is compared with the input it came from, field by field. A rule stated
wrongly on one side only (planted below, on the writer's side and on the
loader's) must show up as a refusal or as a mismatch.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

import certfsm._artifact_reading as reading
from certfsm import ArtifactError, VerdictRecord, artifact_payload, load_artifact, spec_from_dict, write_artifact
from certfsm._artifact_trust import CELLS_EXACT, required_properties
from certfsm.machine import Machine

CORE = Path(importlib.util.find_spec("certfsm").origin).parent


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What a writer is given, independently of any artifact: per input (name, unit, edges, frac_bits); outputs and
    their codes; the machine's parameters; per cell (C order) the proposal and whether it is exact."""

    inputs: tuple[tuple[str, str, tuple[float, ...], int | None], ...]
    outputs: tuple[str, ...]
    codes: tuple[int, ...]
    legal: tuple[int, ...]
    conservative: int
    overridable: tuple[int, ...]
    confirm_cycles: int
    cooldown_cycles: int
    proposal: tuple[int, ...]
    exact: tuple[bool, ...]

    @property
    def legal_mask(self) -> int:
        return sum(1 << k for k in self.legal)

    def spec(self) -> dict:
        return spec_from_dict(
            {
                "certfsm_spec": 1,
                "name": "round-trip",
                "model": "model.onnx",
                "inputs": [
                    {
                        "name": name,
                        "unit": unit,
                        "min": edges[0],
                        "max": edges[-1],
                        "edges": list(edges),
                        **({} if bits is None else {"frac_bits": bits}),
                    }
                    for name, unit, edges, bits in self.inputs
                ],
                "outputs": list(self.outputs),
                "tokens": dict(zip(self.outputs, self.codes)),
                "legal_tokens": [self.outputs[k] for k in self.legal],
                "decision": "argmax",
                "conservative_token": self.outputs[self.conservative],
                "hysteresis": {"confirm_cycles": self.confirm_cycles, "cooldown_cycles": self.cooldown_cycles},
                "overrides": {"overridable": [self.outputs[k] for k in self.overridable]},
            },
            "/certfsm-test/round-trip.spec.json",
            require_model=False,
        ).to_json()

    def certificate(self) -> list[VerdictRecord]:
        def engine(name: str) -> str:
            if name == CELLS_EXACT:
                return "bounds" if any(self.exact) else "none"
            return "explicit" if name.startswith("enumeration-") else "z3"

        return [VerdictRecord("proved", engine(name), property=name) for name in required_properties()]

    def payload(self) -> dict:
        return artifact_payload(
            spec=self.spec(),
            model_sha256="ab" * 32,
            edges=[edges for _, _, edges, _ in self.inputs],
            frac_bits=[bits for *_, bits in self.inputs],
            proposal=self.proposal,
            exact=self.exact,
            allowed=[self.legal_mask] * len(self.proposal),
            conservative=self.conservative,
            confirm_cycles=self.confirm_cycles,
            cooldown_cycles=self.cooldown_cycles,
            overridable=self.overridable,
            codes=self.codes,
            certificate=self.certificate(),
            created_by="certfsm round-trip",
        )


@st.composite
def writer_inputs(draw) -> Inputs:
    n_outputs = draw(st.integers(2, 4))
    codes = tuple(draw(st.permutations(range(16)))[:n_outputs])
    conservative = draw(st.integers(0, n_outputs - 1))
    legal = tuple(sorted({conservative} | set(draw(st.sets(st.integers(0, n_outputs - 1))))))
    overridable = tuple(sorted(draw(st.sets(st.sampled_from(legal)))))
    inputs = []
    for i in range(draw(st.integers(1, 2))):
        start = draw(st.integers(-5, 5))
        steps = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
        edges = tuple(float(start + sum(steps[:k])) for k in range(len(steps) + 1))
        inputs.append((f"x{i}", draw(st.sampled_from(["", "%", "degC"])), edges, draw(st.none() | st.integers(0, 4))))
    n_cells = math.prod(len(edges) - 1 for _, _, edges, _ in inputs)
    exact = tuple(draw(st.lists(st.booleans(), min_size=n_cells, max_size=n_cells)))
    proposal = tuple(draw(st.sampled_from(legal)) if e else conservative for e in exact)
    return Inputs(
        inputs=tuple(inputs),
        outputs=tuple(f"T{k}" for k in range(n_outputs)),
        codes=codes,
        legal=legal,
        conservative=conservative,
        overridable=overridable,
        confirm_cycles=draw(st.integers(1, 5)),
        cooldown_cycles=draw(st.integers(0, 5)),
        proposal=proposal,
        exact=exact,
    )


def mismatches(inputs: Inputs, artifact) -> list[str]:
    """Every decoded value that differs from the input it was written from, by field name."""
    spec = artifact.stored_spec
    machine = Machine.from_artifact(artifact)
    decoded_and_given = {
        "stored_spec.name": (spec.name, "round-trip"),
        "stored_spec.decision": (spec.decision, "argmax"),
        "stored_spec.input_names": (spec.input_names, tuple(name for name, *_ in inputs.inputs)),
        "stored_spec.units": (spec.units, tuple(unit for _, unit, _, _ in inputs.inputs)),
        "stored_spec.envelope": (
            tuple((item.min, item.max) for item in spec.inputs),
            tuple((edges[0], edges[-1]) for _, _, edges, _ in inputs.inputs),
        ),
        "stored_spec.frac_bits": (tuple(item.frac_bits for item in spec.inputs), tuple(b for *_, b in inputs.inputs)),
        "stored_spec.outputs": (spec.outputs, inputs.outputs),
        "stored_spec.codes": (spec.codes, inputs.codes),
        "stored_spec.legal": (spec.legal, inputs.legal),
        "stored_spec.conservative": (spec.conservative, inputs.conservative),
        "stored_spec.overridable": (spec.overridable, inputs.overridable),
        "stored_spec.confirm_cycles": (spec.confirm_cycles, inputs.confirm_cycles),
        "stored_spec.cooldown_cycles": (spec.cooldown_cycles, inputs.cooldown_cycles),
        "stored_spec.rules": (spec.rules, ()),
        "stored_spec.gate_margin": (spec.gate_margin, None),
        "stored_spec.sla_paths": (spec.sla_paths, ()),
        "edges": (tuple(tuple(row.tolist()) for row in artifact.edges), tuple(e for _, _, e, _ in inputs.inputs)),
        "frac_bits": (artifact.frac_bits, tuple(b for *_, b in inputs.inputs)),
        "shape": (artifact.shape, tuple(len(e) - 1 for _, _, e, _ in inputs.inputs)),
        "proposal": (tuple(artifact.proposal.reshape(-1).tolist()), inputs.proposal),
        "exact": (tuple(artifact.exact.reshape(-1).tolist()), inputs.exact),
        "allowed": (tuple(artifact.allowed.reshape(-1).tolist()), (inputs.legal_mask,) * len(inputs.proposal)),
        "conservative": (artifact.conservative, inputs.conservative),
        "confirm_cycles": (artifact.confirm_cycles, inputs.confirm_cycles),
        "cooldown_cycles": (artifact.cooldown_cycles, inputs.cooldown_cycles),
        "overridable": (artifact.overridable, inputs.overridable),
        "codes": (artifact.codes, inputs.codes),
        "certificate": (artifact.certificate, tuple(inputs.certificate())),
        "model_sha256": (artifact.model_sha256, "ab" * 32),
        "created_by": (artifact.created_by, "certfsm round-trip"),
        "machine.names": (machine.names, tuple(name for name, *_ in inputs.inputs)),
        "machine.tokens": (machine.tokens, inputs.outputs),
        "machine.legal": (machine.params.legal, frozenset(inputs.legal)),
        "machine.proposal": (machine.proposal, inputs.proposal),
    }
    return [name for name, (decoded, given) in decoded_and_given.items() if decoded != given]


def round_trip(inputs: Inputs, path: Path, encode=Inputs.payload) -> str | None:
    """None when the written artifact loads and decodes to `inputs`; else the refusal or the fields that differ."""
    try:
        write_artifact(path, encode(inputs))
        artifact = load_artifact(path)
    except ArtifactError as error:
        return f"refused: {error}"
    wrong = mismatches(inputs, artifact)
    return f"decoded differently: {', '.join(wrong)}" if wrong else None


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=writer_inputs())
def test_what_is_written_decodes_to_the_inputs_field_by_field(tmp_path, inputs):
    assert round_trip(inputs, tmp_path / "round-trip.cfsm") is None


EXAMPLE = Inputs(
    inputs=(("a", "%", (0.0, 1.0, 3.0), 2), ("b", "", (-1.0, 0.0, 2.0, 4.0), None)),
    outputs=("KEEP", "FAST", "TURBO"),
    codes=(3, 7, 12),
    legal=(0, 1, 2),
    conservative=0,
    overridable=(0, 2),
    confirm_cycles=2,
    cooldown_cycles=3,
    proposal=(0, 1, 2, 0, 1, 0),
    exact=(True, True, True, False, True, False),
)


def test_the_example_survives_the_round_trip(tmp_path):
    assert round_trip(EXAMPLE, tmp_path / "example.cfsm") is None


def _inverted_status(inputs: Inputs) -> dict:
    payload = inputs.payload()
    table = payload["table"]
    table["status"] = table["status"].translate(str.maketrans("ec", "ce"))
    return payload


def _codes_swapped_in_machine_and_spec(inputs: Inputs) -> dict:
    payload = inputs.payload()
    codes = payload["machine"]["codes"]
    codes[0], codes[1] = codes[1], codes[0]
    payload["spec"]["tokens"] = dict(zip(payload["spec"]["outputs"], codes))
    return payload


def _overridable_descending(inputs: Inputs) -> dict:
    payload = inputs.payload()
    payload["machine"]["overridable"].reverse()
    return payload


def _cells_in_fortran_order(inputs: Inputs) -> dict:
    payload = inputs.payload()
    shape = tuple(len(edges) - 1 for _, _, edges, _ in inputs.inputs)
    for key in ("proposal", "allowed"):
        payload["table"][key] = np.asarray(payload["table"][key]).reshape(shape).reshape(-1, order="F").tolist()
    status = np.array(list(payload["table"]["status"])).reshape(shape).reshape(-1, order="F")
    payload["table"]["status"] = "".join(status)
    return payload


@pytest.mark.parametrize(
    "wrong_writer, found",
    [
        (_inverted_status, r"^decoded differently: .*\bexact\b|^refused: .*status is 'c'"),
        (_codes_swapped_in_machine_and_spec, r"^decoded differently: stored_spec\.codes, codes$"),
        (_overridable_descending, r"^refused: .*payload\.machine\.overridable\[1\]=0 is not above"),
        (_cells_in_fortran_order, r"^decoded differently: proposal, exact, machine\.proposal$"),
    ],
)
def test_a_writer_with_one_wrong_rule_is_caught_by_the_round_trip(tmp_path, wrong_writer, found):
    assert round_trip(EXAMPLE, tmp_path / "right.cfsm") is None
    outcome = round_trip(EXAMPLE, tmp_path / "wrong.cfsm", encode=wrong_writer)
    assert outcome is not None
    assert re.search(found, outcome), outcome


def test_a_loader_with_one_wrong_rule_is_caught_by_the_round_trip(tmp_path, monkeypatch):
    """The loader reading status 'c' as exact: the same round trip fails, from the other side."""
    right = reading.read_table

    def inverted(*args):
        proposal, exact, allowed = right(*args)
        return proposal, ~exact, allowed

    assert round_trip(EXAMPLE, tmp_path / "right.cfsm") is None
    monkeypatch.setattr(reading, "read_table", inverted)
    assert round_trip(EXAMPLE, tmp_path / "wrong.cfsm") == "decoded differently: exact"


READER = (
    "_artifact_reading",
    "_artifact_spec",
    "_artifact_table",
    "_artifact_refinement",
    "_artifact_checks",
    "_artifact_trust",
)
WRITER = ("_artifact_payload",)


def core_imports(module: str, core: Path) -> set[str]:
    """The core modules `module` imports when it runs (relative imports at any depth, not those only for mypy)."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse((core / f"{module}.py").read_text())]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending += node.orelse
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
        pending += ast.iter_child_nodes(node)
    return found


def reach(modules: tuple[str, ...], core: Path = CORE) -> set[str]:
    """`modules` and every core module they import, transitively."""
    seen, pending = set(), list(modules)
    while pending:
        module = pending.pop()
        if module not in seen and (core / f"{module}.py").exists():
            seen.add(module)
            pending += core_imports(module, core)
    return seen


def test_the_writer_and_the_loader_share_no_code_of_the_format():
    assert not reach(WRITER) & set(READER)
    assert not reach(READER) & set(WRITER)


def test_the_independence_check_finds_a_planted_import(tmp_path):
    planted = tmp_path / "_artifact_payload.py"
    planted.write_text((CORE / "_artifact_payload.py").read_text() + "\nfrom ._artifact_checks import _show\n")
    for module in ("_verdict", "_artifact_checks", "_errors"):
        (tmp_path / f"{module}.py").write_text((CORE / f"{module}.py").read_text())
    assert reach(WRITER, tmp_path) & set(READER) == {"_artifact_checks"}
