"""The resume file of `distill`: an append-only JSON-lines record of decided cells.

With a checkpoint file, each decided cell is appended as one JSON line as
soon as its batch is done (flush + fsync); the first line binds the file
to the spec, the network weights and the grid (`_fingerprints`). A rerun
ignores a torn last line, tries undecided cells again, keeps conservative
cells whose witness pair still re-validates (`_trusted_part`: the
expensive witness searches are what a resume saves), and decides every
exact cell of the checkpoint again (sampling and bound propagation are
cheap; the engines run again only for what bounds leave open).

A checkpoint of another spec, model or grid is refused, except where the
caller chose the file itself (`restart_other`: `distill_controller`'s
default checkpoint beside `out=`, which a run of another spec or model
starts afresh). The default checkpoint is removed once the artifact is
written.

Invariant: the checkpoint saves searches, never proofs, so no edit of
the file can put an unproved token into the table.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from certfsm import ReportError, SpecError

from ._cell_problem import ENGINES, _Decision, _Problem, _valid_pairs
from ._table import CONSERVATIVE, EXACT, UNDECIDED

CHECKPOINT_FORMAT = 1
_STATUS_NAMES = {EXACT: "exact", CONSERVATIVE: "conservative"}


def _fingerprints(spec, problem: _Problem) -> dict:
    document = spec.to_json()
    document.pop("model", None)
    spec_hash = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
    model = hashlib.sha256()
    for index, (layer, reads) in enumerate(zip(problem.network.layers, problem.network.reads)):
        model.update(repr(layer.weight.shape).encode())
        model.update(np.ascontiguousarray(layer.weight).tobytes())
        model.update(np.ascontiguousarray(layer.bias).tobytes())
        if reads != (index,):
            # a graph layer: what it reads is part of the model (a chain's hash stays what it was)
            model.update(b"reads" + repr(reads).encode())
    grid = hashlib.sha256(json.dumps([problem.grid.names, [e.tolist() for e in problem.grid.edges]]).encode())
    return {
        "certfsm_distill_checkpoint": CHECKPOINT_FORMAT,
        "spec_sha256": spec_hash,
        "model_sha256": model.hexdigest(),
        "grid_sha256": grid.hexdigest(),
        "cells": problem.grid.n_cells,
    }


class _Checkpoint:
    """An append-only JSON-lines file of decided cells, bound by its first line to spec, model and grid."""

    def __init__(self, path, header: dict, problem: _Problem, *, restart_other: bool = False) -> None:
        self.path = Path(path)
        self.header = header
        self.problem = problem
        self.restart_other = restart_other

    def load(self) -> dict[int, _Decision]:
        """Decided cells recorded so far (the last record of a cell wins); creates the file when absent.

        A torn last line (a crash mid-write) is cut off so that the next
        append starts on a clean line.
        """
        try:
            if not self.path.exists() or self.path.stat().st_size == 0:
                self._write("w", json.dumps(self.header, sort_keys=True) + "\n")
                return {}
            data = self.path.read_bytes()
        except OSError as error:
            raise self._unwritable(error) from None
        lines = data.split(b"\n")
        complete, torn = lines[:-1], lines[-1]
        good_end = len(data) - len(torn)
        try:
            header = json.loads(complete[0]) if complete else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or "certfsm_distill_checkpoint" not in header:
            raise SpecError(
                f"{self.path}: not a certfsm distill checkpoint (its first line is not a checkpoint "
                "header); give another checkpoint= path or delete the file"
            )
        for key, what in (("spec_sha256", "spec"), ("model_sha256", "model"), ("grid_sha256", "grid")):
            if header.get(key) != self.header[key] and self.restart_other:
                try:
                    self._write("w", json.dumps(self.header, sort_keys=True) + "\n")
                except OSError as error:
                    raise self._unwritable(error) from None
                return {}
            if header.get(key) != self.header[key]:
                raise SpecError(
                    f"{self.path}: checkpoint belongs to another {what} ({key} "
                    f"{str(header.get(key))[:12]}..., this run has {self.header[key][:12]}...); "
                    "delete the file or give another checkpoint= path to start afresh"
                )
        decided: dict[int, _Decision] = {}
        for number, line in enumerate(complete[1:], start=2):
            if not line.strip():
                continue
            try:
                record = self._record(json.loads(line))
            except (ValueError, KeyError, TypeError) as error:
                raise SpecError(
                    f"{self.path}: line {number} is not a cell record ({error}); delete the file "
                    "or give another checkpoint= path to start afresh"
                ) from None
            decided[record.cell] = record
        if torn:
            try:
                with open(self.path, "r+b") as handle:
                    handle.truncate(good_end)
            except OSError as error:
                raise self._unwritable(error) from None
        return {cell: d for cell, d in decided.items() if d.status != UNDECIDED}

    def _record(self, item: dict) -> _Decision:
        cell = int(item["cell"])
        if not 0 <= cell < self.problem.grid.n_cells:
            raise ValueError(f"cell {cell} is outside the grid")
        token = self.problem.outputs.index(item["token"])
        status = {"exact": EXACT, "conservative": CONSERVATIVE, "undecided": UNDECIDED}[item["status"]]
        witness = item.get("witness")
        if witness is not None:
            witness = tuple(np.array(x, dtype=np.float64) for x in witness)
            if len(witness) != 2 or any(x.shape != (self.problem.grid.n_inputs,) for x in witness):
                raise ValueError("the witness is not two input points")
        if status == CONSERVATIVE and (witness is None or token != self.problem.conservative):
            raise ValueError("a conservative cell needs a witness and the conservative token")
        if item["engine"] not in ENGINES:
            raise ValueError(f"engine {item['engine']!r} is not one of {ENGINES}")
        return _Decision(cell, status, token, item["engine"], witness, str(item.get("reason", "")))

    def _item(self, decision: _Decision) -> dict:
        """The JSON record of `decision` (the inverse of `_record`)."""
        status = _STATUS_NAMES.get(decision.status, "undecided")
        witness = None if decision.witness is None else [[float(v) for v in x] for x in decision.witness]
        return {
            "cell": decision.cell,
            "status": status,
            "token": self.problem.outputs[decision.token],
            "engine": decision.engine,
            "witness": witness,
            "reason": decision.reason,
        }

    def append(self, decisions: list[_Decision]) -> None:
        if not decisions:
            return
        try:
            self._write("a", "".join(json.dumps(self._item(d)) + "\n" for d in decisions))
        except OSError as error:
            raise self._unwritable(error) from None

    def _write(self, mode: str, text: str) -> None:
        with open(self.path, mode, encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def _unwritable(self, error: OSError) -> ReportError:
        return ReportError(
            f"{self.path}: cannot read or write the checkpoint ({error.strerror or error}); "
            "give a checkpoint= path in a writable folder"
        )


def _trusted_part(problem: _Problem, recorded: dict[int, _Decision]) -> dict[int, _Decision]:
    """The checkpoint's decisions that are kept as they are: conservative cells whose witness still holds.

    A witness pair is re-validated now (both points in the cell,
    different decisions in float64 and onnxruntime: two evaluations
    each). An exact cell is never taken on trust: it is decided again
    from scratch (sampling and bound propagation are cheap; the engines
    run again only for what bounds leave open), so no edit of the file
    can put an unproved token into the table.
    """
    conservative = sorted(c for c, d in recorded.items() if d.status == CONSERVATIVE)
    if not conservative:
        return {}
    cells = np.array(conservative, dtype=np.int64)
    first = np.array([recorded[c].witness[0] for c in conservative])
    second = np.array([recorded[c].witness[1] for c in conservative])
    valid = _valid_pairs(problem, cells, first, second)
    return {c: recorded[c] for c, ok in zip(conservative, valid.tolist()) if ok}
