"""A distillation's exact cells come with a proof certificate that the independent checker re-checks.

The binding matters as much as the proofs: each certificate entry must be
about one exact cell of the artifact, with the artifact's token, on a box
that covers the cell; and an entry that claims another token must be
refused by the checker, naming the cell. The checker reads the entries
in batches and each unsafe set and proof once, so a change to one entry,
or to a set or proof that many share, must still be refused naming the
first entry it breaks.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from certfsm import load_artifact
from certfsm.checker import check_certificate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(distilled_example):
    _, run, artifact = distilled_example
    folder = run.report_path
    model = json.loads((folder / "summary.json").read_text())["model"]["path"]
    return folder, load_artifact(artifact), run.distillation, model


def _mutated(folder, tmp_path, change):
    document = json.loads((folder / "cells-exact.cert.json").read_text())
    change(document)
    mutated = tmp_path / "cells-exact.cert.json"
    mutated.write_text(json.dumps(document))
    return mutated, document


def test_every_exact_cell_of_the_example_has_an_entry_and_they_all_check(report):
    folder, artifact, distillation, model = report
    entry = json.loads((folder / "summary.json").read_text())["cell_certificate"]
    checked = check_certificate(folder / entry["file"], model)
    document = json.loads((folder / entry["file"]).read_text())
    assert checked.ok and checked.leaves > len(document["properties"]), checked.failure
    assert hashlib.sha256((folder / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
    exact = np.flatnonzero(artifact.exact.reshape(-1))
    assert entry["certified_cells"] == entry["exact_cells"] == len(exact) > 0 and "not_certified" not in entry
    outputs, tokens = artifact.spec["outputs"], artifact.proposal.reshape(-1)
    names = [item["name"] for item in document["properties"]]
    assert names == [f"cell {cell}: the decision is {outputs[tokens[cell]]}" for cell in exact]
    grid = distillation.table.grid
    for cell, item in zip(exact.tolist()[::97], document["properties"][::97]):
        lower, upper = grid.cell_bounds(cell)
        stated = item["inputs"]
        assert all(float(low) <= lo and hi <= float(high) for (low, high), lo, hi in zip(stated, lower, upper))


def test_each_unsafe_set_and_proof_is_written_once_and_cells_of_one_token_share_theirs(report):
    folder, artifact, _, _ = report
    document = json.loads((folder / "cells-exact.cert.json").read_text())
    texts = [json.dumps(s, sort_keys=True) for s in document["unsafe_sets"]]
    assert len(set(texts)) == len(texts) and len(set(map(json.dumps, document["proofs"]))) == len(document["proofs"])
    token_of = {}
    for item in document["properties"]:
        assert token_of.setdefault(item["name"].split(" is ")[1], item["unsafe"]) == item["unsafe"]
    assert sorted(token_of.values()) == list(range(len(document["unsafe_sets"])))


def test_an_entry_that_claims_another_token_is_refused_naming_the_cell(report, tmp_path):
    folder, _, _, model = report

    def claim_another_token(document):
        first = document["properties"][0]
        other = next(e for e in document["properties"] if e["unsafe"] != first["unsafe"])
        first["unsafe"] = other["unsafe"]

    mutated, document = _mutated(folder, tmp_path, claim_another_token)
    checked = check_certificate(mutated, model)
    assert not checked.ok and checked.failure.startswith(f"property {document['properties'][0]['name']}, disjunct ")


def test_one_entry_moved_among_thousands_that_share_its_set_and_proofs_is_refused_naming_it_alone(report, tmp_path):
    """Entry 2000 is given the box of a cell of another token (where its token is not the decision); every other
    entry, in the same batches and sharing its unsafe set and proofs, still checks."""
    folder, _, _, model = report

    def move(document):
        moved = document["properties"][2000]
        moved["inputs"] = next(e for e in document["properties"] if e["unsafe"] != moved["unsafe"])["inputs"]

    mutated, document = _mutated(folder, tmp_path, move)
    checked = check_certificate(mutated, model)
    moved = document["properties"][2000]
    assert not checked.ok and checked.failure.startswith(f"property {moved['name']}, disjunct "), checked.failure
    assert f"x0 in [{float(moved['inputs'][0][0]):.9g}, " in checked.failure
    del document["properties"][2000]
    mutated.write_text(json.dumps(document))
    assert check_certificate(mutated, model).ok


def test_a_changed_shared_unsafe_set_is_refused_naming_the_first_property_that_uses_it(report, tmp_path):
    """Every row of the first disjunct of a shared set made true everywhere (rhs 1000): the claim is false for every
    cell of that token, and the first one is named."""
    folder, _, _, model = report
    document = json.loads((folder / "cells-exact.cert.json").read_text())
    shared = document["properties"][-1]["unsafe"]

    def loosen(document):
        for row in document["unsafe_sets"][shared][0]:
            row["rhs"] = "1000"

    mutated, document = _mutated(folder, tmp_path, loosen)
    first = next(e for e in document["properties"] if e["unsafe"] == shared)
    checked = check_certificate(mutated, model)
    assert not checked.ok and checked.failure.startswith(f"property {first['name']}, disjunct 0, leaf 0 ")
