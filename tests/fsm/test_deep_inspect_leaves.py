"""`inspect --deep` on a refined table: every exact leaf re-proved against the model, a swapped leaf token named."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from certfsm import load_artifact
from certfsm.cli import main
from certfsm.fsm import deep_inspect
from test_refine import run

pytestmark = pytest.mark.slow


def _rehash():
    path = Path(__file__).parents[1] / "core" / "test_artifact_trust.py"
    spec = importlib.util.spec_from_file_location("artifact_trust_rehash", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rehash


@pytest.fixture(scope="module")
def refined(tmp_path_factory):
    """(artifact, model, report) of the tiny two-input controller distilled with refined cells."""
    folder = tmp_path_factory.mktemp("refined")
    result = run(folder, "tiny", 1)
    assert result.certified
    return folder / "tiny.cfsm", folder / "tiny" / "tiny.onnx", folder / "tiny-report"


def test_every_exact_leaf_re_proves_and_the_cli_says_so(refined, capsys):
    artifact, model, report = refined
    leaves = load_artifact(artifact).refinement
    exact = sum(leaf.status.name == "EXACT" for tree in leaves.trees for leaf in tree.leaves)
    result = deep_inspect(artifact, model, report=report, jobs=1)
    assert result.is_ok, result.failures
    assert sum(result.leaves_proved.values()) == exact > 0 and result.leaf_failures == ()
    assert all(q.verdict == "proved" and q.is_ok for q in result.queries)
    code = main(["inspect", str(artifact), "--deep", "--model", str(model), "--no-progress", "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"deep: exact leaves of the refined cells re-proved against the model: {exact} of {exact} (" in out


def test_an_exact_leaf_with_another_token_is_named_by_cell_leaf_box_and_token(refined, tmp_path, capsys):
    artifact, model, _ = refined
    payload = json.loads(artifact.read_bytes())["payload"]
    leaves = payload["table"]["refinement"]
    outputs = payload["spec"]["outputs"]
    place = next(k for k, status in enumerate(leaves["status"]) if status == "e" and leaves["proposal"][k] != 0)
    swapped = 3 - leaves["proposal"][place]  # A <-> B: legal, allowed, and wrong
    leaves["proposal"][place] = swapped
    edited = _rehash()(tmp_path, payload)
    result = deep_inspect(edited, model, jobs=1)
    assert not result.is_ok
    (failure,) = result.leaf_failures
    sizes = [sum(node[0] == "leaf" for node in tree) for tree in leaves["trees"]]
    tree = next(j for j in range(len(sizes)) if place < sum(sizes[: j + 1]))
    cell, local = leaves["cells"][tree], place - sum(sizes[:tree])
    assert failure.cell == cell and failure.bounds.startswith(f"leaf {local}: x0 in [")
    assert failure.token == outputs[swapped] and failure.reason.startswith("not re-proved")
    code = main(["inspect", str(edited), "--deep", "--model", str(model), "--no-progress", "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 1 and f"FAILED exact cell {cell} (leaf {local}: x0 in [" in out, out
