"""Formal equivalence: a Verilog module equals the certified machine, for every register state and every input.

The module is read as yosys elaborates it (`_transition.py`: the text,
not certfsm's structure, is what is judged), and each claim is one
SMT-LIB query over one rising edge from a state ``s`` to the state ``t``
after it, solved by Z3 from its own text (``unsat`` means the claim
holds; the transition relation that begins every claim is read once and
shared, `certfsm.verify.SharedPrefix`, which changes no answer). The port contract (`_hardware.py`) fixes which registers the
claims relate; with its two-edge pipeline a decision is split at the
pipeline registers:

- ``reset``: an edge with ``rst`` gives the machine's initial state
  (`certfsm.machine.initial_state`) and the contract's reset outputs, and
  empties the pipeline;
- ``hold``: an edge with ``valid_q`` 0 keeps the state and the outputs and
  clears ``out_valid``;
- ``sample`` (binning, ROM and masks): for every input bus value, the
  pipeline registers loaded at the edge hold the envelope test, the cell
  and that cell's table and mask words as the artifact states them: the
  integer thresholds ceil(edge * 2^frac_bits) and envelope of its edges
  (`Machine.fixed_point`), its table and its allowed masks, one box per
  cell, and in a refined cell the words of the leaf its box tree gives
  (each split compared as ``bus >= ceil(t * 2^frac_bits)``); and
  ``in_valid``, ``sla_ok`` and the override pass through. On a refined
  table of more than `PIECE_WORDS` ROM words it is proved in pieces
  (`_pieces.py`): readings out of envelope, and boxes of bins, each its
  own query and file, and a cover query showing that together they hold
  every reading;
- ``step`` (the state machine): for every state in the machine's domain
  (`StepEncoding`'s ``domain``: every reachable state lies in it) and
  every content of the pipeline registers (the envelope bit, SLA bit and
  override free; inside the envelope the proposal and mask one of the
  table's (proposal, mask) classes of its cells and leaves, which is what
  ``sample`` loads), the
  next state, token code, reason code, cell index and ``out_valid`` are
  those of `certfsm.fsm.StepEncoding`, the Z3 encoding the machine proofs
  use, so the module inherits every machine property proved there.

Together: reset starts in the initial state, ``step`` keeps the state in
the domain, and each decision equals `certfsm.machine.step` on the
reading sampled one edge before. A ``sat`` answer is a concrete
counterexample: the differing reading or state, with what the artifact's
machine gives (recomputed in Python) and what the module gives.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from certfsm import EngineError
from certfsm.machine import Machine
from certfsm.verify import SharedPrefix, solve_text, write_proof_query

from ._checks import Check
from ._claims import DESCRIPTIONS, LOGIC, PIPELINE_REGISTERS, QUERIES, Claims
from ._files import certified_machine, file_sha256, output_folder
from ._hardware import STATE_REGISTERS, Hardware, hardware_of
from ._pieces import sample_pieces
from ._transition import Transition, VerilogError, transition_of


@dataclass(frozen=True)
class QueryResult:
    """One claim: its verdict as Z3 returned it, and for a violated claim the differing input and state.

    A claim split in pieces (the sample claim of a large refined table, `_pieces.py`) has no file of its own: each
    of its `pieces` (the cover query first) is a `QueryResult` with its file, and the claim is proved only when
    every piece is, violated when one is (its counterexample is the claim's), else unknown naming the piece
    (`_joined`). `description` says what a piece's readings are.
    """

    name: str
    verdict: str
    seconds: float
    reason: str = ""
    counterexample: str = ""
    smt2_path: str | None = None
    smt2_sha256: str | None = None
    pieces: tuple[QueryResult, ...] = ()
    description: str = ""

    def record(self) -> dict:
        """The `summary.json` record of this claim or piece (a split claim's pieces listed under it)."""
        record = {
            "name": self.name,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 3),
            "description": self.description or DESCRIPTIONS[self.name],
            "smt2": Path(self.smt2_path).name if self.smt2_path else None,
            "smt2_sha256": self.smt2_sha256,
            "reason": self.reason,
            "counterexample": self.counterexample,
        }
        return record | ({"pieces": [piece.record() for piece in self.pieces]} if self.pieces else {})

    @property
    def slowest(self) -> QueryResult | None:
        """The piece that took longest (None for a claim in one piece)."""
        return max(self.pieces, key=lambda piece: piece.seconds, default=None)


@dataclass(frozen=True)
class Equivalence:
    """The verdict of `prove_equivalence`: every query, and the hashes that tie Verilog to artifact."""

    module: str
    verilog_path: str
    verilog_sha256: str
    artifact_sha256: str
    yosys_version: str
    yosys_seconds: float
    queries: tuple[QueryResult, ...] = field(default=())

    @property
    def is_proved(self) -> bool:
        return bool(self.queries) and all(q.verdict == "proved" for q in self.queries)

    @property
    def verdict(self) -> str:
        if self.is_proved:
            return "proved"
        return "violated" if any(q.verdict == "violated" for q in self.queries) else "unknown"

    @property
    def first_difference(self) -> QueryResult | None:
        return next((q for q in self.queries if q.verdict == "violated"), None)

    @property
    def seconds(self) -> float:
        return self.yosys_seconds + sum(q.seconds for q in self.queries)

    def summary(self) -> dict:
        """The `summary.json` record: verdict, hashes, and per query its verdict, time, file and SHA-256."""
        return {
            "verdict": self.verdict,
            "module": self.module,
            "verilog_sha256": self.verilog_sha256,
            "artifact_sha256": self.artifact_sha256,
            "yosys": self.yosys_version,
            "yosys_seconds": round(self.yosys_seconds, 3),
            "seconds": round(self.seconds, 3),
            "queries": [q.record() for q in self.queries],
        }

    def lines(self) -> list[str]:
        """What the CLI prints: one line per query, then the first difference in full."""
        lines = [
            f"{self.verilog_path}: module {self.module} (sha256 {self.verilog_sha256}) against artifact "
            f"sha256 {self.artifact_sha256}"
        ]
        for q in self.queries:
            why = f" ({q.reason})" if q.reason and q.verdict != "violated" else ""
            slowest = q.slowest
            split = (
                f" [{len(q.pieces)} queries: the cover and {len(q.pieces) - 1} pieces, slowest {slowest.name} "
                f"{slowest.seconds:.1f} s]"
                if slowest is not None
                else ""
            )
            lines.append(f"  {q.name:<7} {q.verdict:<9} {q.seconds:7.2f} s  {DESCRIPTIONS[q.name]}{split}{why}")
            width = max((len(piece.name) for piece in q.pieces), default=0)
            for piece in q.pieces:
                why = f" ({piece.reason})" if piece.reason and piece.verdict != "violated" else ""
                lines.append(
                    f"    {piece.name:<{width}} {piece.verdict:<9} {piece.seconds:7.2f} s  {piece.description}{why}"
                )
        difference = self.first_difference
        if difference is not None:
            lines.append(f"first difference ({difference.name}): {difference.counterexample}")
        lines.append(f"equivalence: {self.verdict} in {self.seconds:.1f} s (yosys {self.yosys_seconds:.1f} s)")
        return lines


def prove_equivalence(
    machine: Machine,
    verilog,
    *,
    folder=None,
    timeout: float = 600.0,
    stable: bool = False,
    top: str | None = None,
    piece_words: int | None = None,
) -> Equivalence:
    """Prove the Verilog module in file `verilog` equal to `machine` (decoded from its artifact).

    With `folder` (an existing folder), each query is written there as
    ``equivalence-<name>.smt2``; a table of more than `piece_words` ROM
    words (`PIECE_WORDS` when None) has its sample claim split into pieces
    of at most that many (`_pieces.py`), each written as ``equivalence-sample-<piece>.smt2``
    beside the cover query ``equivalence-sample-cover.smt2``. A module
    whose ports or contract registers are missing or of the wrong width is
    a `VerilogError` (bad input), not a verdict. `timeout` bounds each
    query (each piece).
    """
    path = Path(verilog)
    reference = hardware_of(machine, top or "certfsm_reference")
    transition = transition_of(path, top)
    _check_contract(path, transition, reference)
    claims = Claims(machine, reference, transition, path.name)
    verilog_sha = file_sha256(path)
    prefix = claims.prefix()
    started = time.perf_counter()
    shared = SharedPrefix("\n".join(prefix), "\n".join(claims.view_declarations()))
    reading = time.perf_counter() - started  # Z3 reading the transition relation, shared by the claims
    header = {
        "module": transition.module,
        "verilog-sha256": verilog_sha,
        "artifact-sha256": machine.artifact_sha256 or "(none)",
        "transition-relation": f"{transition.yosys_version} write_smt2 -stbv -wires",
        "machine": machine.params.describe(),
    }

    def solve(
        name: str, query: str, claim: list[str], context, explain, share: float, description: str = "", **extra
    ) -> QueryResult:
        """Solve one query, `claim` after the prefix read once in `context` (a `SharedPrefix`), or with `context`
        None the standalone `claim`; write its file ``equivalence-<query>.smt2`` (the prefix and `claim`, or
        `claim` alone) and say what it gives; its time includes `share` of the time Z3 took to read the prefix."""
        started = time.perf_counter()
        if context is None:
            answer, model, reason = solve_text("\n".join(claim), timeout)
        else:
            answer, model, reason = context.solve("\n".join(claim), timeout)
        seconds = time.perf_counter() - started + share
        counterexample = ""
        if answer == "unsat":
            verdict = "proved"
        elif answer == "sat":
            verdict, counterexample = "violated", explain(model)
        else:
            verdict = "unknown"
        smt2_path = sha = None
        if folder is not None:
            smt2_path = str(Path(folder) / f"equivalence-{query}.smt2")
            sha = write_proof_query(
                smt2_path,
                [*(prefix if context is not None else []), *claim],
                LOGIC[name] if context is not None else "QF_BV",
                prop_name=f"equivalence-{query}",
                description=DESCRIPTIONS[name] + (f"; {description}" if description else ""),
                verdict=verdict,
                seconds=seconds,
                stable=stable,
                extra=header | extra,
            )
        return QueryResult(query, verdict, seconds, reason, counterexample, smt2_path, sha, description=description)

    results = []
    pieces = sample_pieces(machine, piece_words)
    for name in QUERIES:
        if name != "sample" or not pieces:
            explain = functools.partial(claims.explain, name)
            results.append(solve(name, name, claims.claim(name), shared, explain, reading / len(QUERIES)))
            continue
        cover = solve(
            name,
            "sample-cover",
            claims.cover(pieces),
            None,
            lambda model: f"the reading {claims.reading(model)} lies in no piece, or in a box piece outside its box",
            0.0,
            f"the {len(pieces)} pieces hold every reading, each box piece's in its box",
            pieces=", ".join(f"equivalence-sample-{piece.name}.smt2" for piece in pieces),
        )
        parts = [cover]
        for piece in pieces:
            parts.append(
                solve(
                    name,
                    f"sample-{piece.name}",
                    claims.claim(name, piece),
                    shared,
                    functools.partial(claims.explain, name),
                    reading / len(QUERIES) / len(pieces),
                    piece.describe(machine),
                    piece=f"{piece.name}, one of {len(pieces)}: equivalence-sample-cover.smt2 shows that together "
                    "they hold every reading",
                )
            )
        results.append(_joined(name, parts))
    return Equivalence(
        transition.module,
        str(path),
        verilog_sha,
        machine.artifact_sha256,
        transition.yosys_version,
        transition.seconds,
        tuple(results),
    )


def _joined(name: str, parts: list[QueryResult]) -> QueryResult:
    """A claim split in pieces (`parts`, the cover query first): unknown, naming the cover, unless the cover query
    is proved (otherwise the pieces are not the whole claim, and a piece's counterexample could come from words its
    box does not state); then violated when a piece is (the first such piece's counterexample), proved when every
    piece is, else unknown naming the first piece that is not."""
    cover, pieces = parts[0], parts[1:]
    seconds = sum(part.seconds for part in parts)
    if cover.verdict == "proved":
        violated = next((piece for piece in pieces if piece.verdict == "violated"), None)
        if violated is not None:
            return QueryResult(name, "violated", seconds, counterexample=violated.counterexample, pieces=tuple(parts))
    failed = next((part for part in parts if part.verdict != "proved"), None)
    if failed is None:
        return QueryResult(name, "proved", seconds, pieces=tuple(parts))
    why = failed.counterexample if failed.verdict == "violated" else failed.reason
    reason = f"{failed.name} ({failed.description}): {failed.verdict}" + (f", {why}" if why else "")
    return QueryResult(name, "unknown", seconds, reason, pieces=tuple(parts))


def check_verilog(
    artifact_path, verilog, *, report=None, timeout: float = 600.0, top: str | None = None
) -> Equivalence:
    """`certfsm check-verilog`: prove a Verilog file equal to a certified artifact (refused as the loader refuses it).

    With `report`, the queries and a ``summary.json`` (verdict, hashes,
    per query its file and SHA-256, so `certfsm recheck` re-runs them) are
    written into that folder.
    """
    artifact_path = Path(artifact_path)
    _, machine = certified_machine(artifact_path)
    folder = None if report is None else output_folder(report, "report folder", "report")
    proof = prove_equivalence(machine, verilog, folder=folder, timeout=timeout, top=top)
    if folder is not None:
        summary = {
            "certfsm_equivalence": 1,
            "artifact": {"file": artifact_path.name, "payload_sha256": machine.artifact_sha256},
            **proof.summary(),
        }
        (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return proof


def equivalence_check(machine: Machine, folder: Path, module_file: str) -> Check:
    """The export's ``equivalence`` check: `prove_equivalence` with its queries left in the export folder."""
    started = time.perf_counter()
    try:
        proof = prove_equivalence(machine, Path(folder) / module_file, folder=folder)
    except (VerilogError, EngineError) as error:
        return Check("equivalence", False, str(error), seconds=time.perf_counter() - started)
    difference = proof.first_difference
    names = ", ".join(
        q.name + (f" in {len(q.pieces) - 1} pieces and their cover" if q.pieces else "") for q in proof.queries
    )
    detail = f"{proof.verdict}: {len(proof.queries)} queries ({names}) by z3 in {proof.seconds:.1f} s" + (
        f"; first difference ({difference.name}): {difference.counterexample}" if difference else ""
    )
    return Check("equivalence", proof.is_proved, detail, proof.summary(), seconds=time.perf_counter() - started)


# ------------------------------------------------------------------ the port contract


def _check_contract(path: Path, transition: Transition, reference: Hardware) -> None:
    """Every port and contract register of the reference module exists with the same width and direction."""
    if transition.clocks != ("clk posedge",):
        clocks = ", ".join(transition.clocks) or "none"
        raise VerilogError(
            f"{path}: module {transition.module} loads its registers on {clocks}; the port contract "
            "has every register load on the rising edge of clk (always @(posedge clk))"
        )
    expected = {port.name: (port.direction, port.width) for port in reference.module.ports if port.name != "clk"}
    widths = {
        node.name: node.width
        for node in reference.module.body
        if getattr(node, "name", None) in (*STATE_REGISTERS, *PIPELINE_REGISTERS)
    }
    for name, (direction, width) in expected.items():
        kind = "input" if direction == "input" else "output"
        if name not in transition.signals or (direction == "input") != (name in transition.inputs):
            raise VerilogError(
                f"{path}: module {transition.module} has no {kind} port {name} ({width} bits) that "
                "the artifact's port contract needs; export the module again with certfsm "
                "export-verilog, or restore the port"
            )
        if transition.signals[name] != width:
            raise VerilogError(
                f"{path}: port {name} is {transition.signals[name]} bits but the artifact needs "
                f"{width}; restore the width certfsm export-verilog wrote"
            )
    for name, width in widths.items():
        if name not in transition.registers:
            raise VerilogError(
                f"{path}: module {transition.module} has no register {name} that the port contract "
                "relates to the machine (certfsm.hdl_export); keep the contract's register names"
            )
        if transition.signals[name] != width:
            raise VerilogError(
                f"{path}: register {name} is {transition.signals[name]} bits but the contract needs "
                f"{width}; restore the width certfsm export-verilog wrote"
            )
