"""What the artifact loader re-derives from the payload's own spec, with the standard library alone.

A SHA-256 over the payload only catches accidents: whoever edits a
payload can rehash it. So beyond types and ranges the loader recomputes,
from the spec stored in the payload, everything that needs neither a
solver nor the model, and refuses the first mismatch with one line naming
the item (`certfsm._artifact_spec` calls these checks in its order):

- the grid: every input has a name, min < max, and bin edges from exactly
  min to exactly max (explicit, as the canonical spec stores them, or
  ``bins`` materialised exactly as the spec loader does), equal to
  ``payload.grid``;
- the machine parameters equal the spec's (conservative token, codes,
  confirm and cooldown cycles, overridable tokens);
- the legality rules are well formed as the spec loader requires (known
  inputs and tokens, a non-empty box that meets the envelope, never the
  conservative token), and every cell's allowed mask equals the mask the
  rules give (`certfsm.machine.cell_allowed_masks`: closed rule box
  against half-open cell, the last bin closed; the distillation's
  vectorised `certfsm.fsm._table.allowed_masks` is tested equal to it).
  With the structural checks (every proposal allowed in its cell, every
  conservative cell on the conservative token) every table token is then
  legal and allowed by the spec's own rules;
- the confidence gate is consistent: a margin >= 0, or a probability
  whose margin ln((K-1)p/(1-p)) (`certfsm._decision`) is >= 0;
- the certificate (`certificate_problem`, run where the runtime needs a
  certified artifact; `is_certified` is that rule as a predicate, the
  only statement of "certified" in certfsm): exactly the properties ``certfsm distill`` proves
  for this spec (`required_properties`), each required, ``proved``, and
  by an engine that can prove it (`engine_problem`).

What it cannot re-derive, and what checks it instead:

- the token of an exact cell, whether a cell is really exact, and
  whether the table fits the gate margin: these need the model, so a
  swap of one allowed token for another in an exact cell, or a
  conservative cell relabelled exact, still loads; ``inspect --deep``
  re-proves every exact cell against the model;
- ``model_sha256``: only the model file can confirm it (``inspect --deep``);
- the spec itself: an edit that changes the spec and everything that
  repeats it, consistently (a rule box moved or deleted with the masks
  recomputed, confirm/cooldown changed in machine and spec, tokens made
  overridable in both, the gate changed), gives a self-consistent
  artifact of another spec; only a signature over the payload
  (`certfsm._artifact_signature`) tells it from the one that was
  distilled.

Standard library only, like every module the loader imports (``bins``
become edges by `certfsm.machine.uniform_edges`, as in the spec loader).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from ._artifact_checks import PayloadChecks, _show
from ._decision import margin_from_probability
from ._stored_spec import RuleBox
from ._verdict import VerdictRecord
from .machine import uniform_edges

CELLS_EXACT = "cells-exact"
TABLE_PROPERTIES = ("table-tokens", "table-masks", "table-codes")
INVARIANT_QUERIES = ("invariant-initial", "invariant-inductive")
MACHINE_PROPERTIES = (
    "output-legal",
    "output-allowed",
    "fallback-conservative",
    "switch-cooldown",
    "total-deterministic",
    "override-allowed",
)

CELL_ENGINES = ("bounds", "check", "marabou", "z3")
"""What may prove an exact cell: sound bound propagation (``bounds``, vectorised in the distillation, or inside
``verify.check`` without a complete engine: ``check``), or a complete engine (``z3``, exact UNSAT; ``marabou``,
whose UNSAT ``verify.check`` counts only when an exact method agrees: docs/semantics.md, "Verdicts"). Sampling
and the witness search (``sampling``, ``falsify``) only ever show that a cell is NOT exact, and ``undecided``
proves nothing."""

_FAMILIES = (
    f"{CELLS_EXACT}, table-{{{','.join(n[6:] for n in TABLE_PROPERTIES)}}}, machine-{{invariant-initial,"
    "invariant-inductive,<property>}, enumeration-<property>"
)

_ENGINE_RULES = {
    "cells-": "'none' when no cell is exact, else the engines of the exact cells joined by '+', sorted, "
    f"each one of {', '.join(CELL_ENGINES)}",
    "table-": "z3 only: the table's SMT-LIB query is unsat over exact arithmetic",
    "machine-": "z3 only: the machine's SMT-LIB query is unsat over exact arithmetic",
    "enumeration-": "explicit only: the complete explicit-state enumeration",
}


def required_properties(spec: object = None) -> tuple[str, ...]:
    """The certificate entries `certfsm distill` writes for `spec`, all required, in the order it writes them.

    Every spec gets the same set (`certfsm.fsm._pipeline`):
    ``cells-exact``, the table properties, the machine's invariant and
    properties proved by Z3 (``machine-*``) and the same properties by
    enumeration (``enumeration-*``); the tests check that the pipeline
    writes exactly this. `spec` is taken so that a property that depends
    on the spec has one place to be added.
    """
    machine = tuple(f"machine-{name}" for name in INVARIANT_QUERIES + MACHINE_PROPERTIES)
    return (CELLS_EXACT,) + TABLE_PROPERTIES + machine + tuple(f"enumeration-{name}" for name in MACHINE_PROPERTIES)


def engine_problem(name: str, engine: str, has_exact_cells: bool) -> str | None:
    """None when `engine` can have proved the required property `name`; else why not ('' when it never can)."""
    if name == CELLS_EXACT:
        if engine == "none":
            return "when the table has exact cells" if has_exact_cells else None
        if not has_exact_cells:
            return "when no cell is exact"
        parts = engine.split("+")
        return None if parts == sorted(set(parts)) and set(parts) <= set(CELL_ENGINES) else ""
    expected = "z3" if name.startswith(("table-", "machine-")) else "explicit"
    return None if engine == expected else ""


def engine_rule(name: str) -> str:
    return next(text for prefix, text in _ENGINE_RULES.items() if name.startswith(prefix))


@dataclass(frozen=True)
class CertificateRefusal:
    """The first reason a certificate is not one the runtime may trust: the index of the entry (None: the whole
    certificate) and the text (without file label and fix)."""

    index: int | None
    text: str
    fix: str


def is_certified(entries: Iterable[VerdictRecord], spec: object, has_exact_cells: bool) -> bool:
    """The one rule for "certified", applied by the loader, by `Artifact.is_certified` and by `certfsm distill`.

    Certified means the runtime may trust the certificate: exactly the
    properties `certfsm distill` proves for `spec`, each required, proved,
    by an engine that can prove it (`certificate_problem` names the first
    item that fails).
    """
    return certificate_problem(entries, spec, has_exact_cells) is None


def certificate_problem(
    entries: Iterable[VerdictRecord], spec: object, has_exact_cells: bool
) -> CertificateRefusal | None:
    """The first failing item of the certificate `entries` (`VerdictRecord`s: property, engine, verdict, required)."""
    required = required_properties(spec)
    rerun = "re-run certfsm distill"
    seen = set()
    for index, entry in enumerate(entries):
        name = entry.property
        at = f"certificate[{index}] {name!r}"
        if name not in required:
            return CertificateRefusal(
                index, f"{at} is not one of the {len(required)} properties certfsm distill proves ({_FAMILIES})", rerun
            )
        seen.add(name)
        if not entry.required:
            return CertificateRefusal(
                index, f"{at} has required=false, but the runtime needs every property certfsm distill proves", rerun
            )
        if entry.verdict != "proved":
            return CertificateRefusal(
                index,
                f"{at} has verdict {entry.verdict!r}, but the runtime needs it proved",
                f"{rerun} or fix the spec",
            )
        why = engine_problem(name, entry.engine, has_exact_cells)
        if why is not None:
            return CertificateRefusal(
                index,
                f"{at} names engine {entry.engine!r}, which cannot prove it"
                f"{' ' + why if why else ''} (expected: {engine_rule(name)})",
                rerun,
            )
    missing = [name for name in required if name not in seen]
    if missing:
        return CertificateRefusal(
            None,
            f"the certificate has no entry for {missing[0]!r}"
            f"{f' (nor {len(missing) - 1} more)' if len(missing) > 1 else ''}, but the "
            "runtime needs every property certfsm distill proves",
            rerun,
        )
    return None


# ------------------------------------------------------------- the spec's own statements


class SpecDerivation:
    """The spec-side re-derivations, raising through `checks` (the loader's `certfsm._artifact_checks.PayloadChecks`)."""

    def __init__(self, checks: PayloadChecks) -> None:
        self.checks = checks

    def input_edges(self, item: dict[str, Any], where: str) -> list[float]:
        """The input's bin edges as the spec loader materialises them; checks name, min < max and the end edges."""
        c = self.checks
        c.obj(item, where, ("name", "min", "max"), only=False)
        c.text(item["name"], f"{where}.name")
        low, high = c.number(item["min"], f"{where}.min"), c.number(item["max"], f"{where}.max")
        if not float(low) < float(high):
            raise c.fail(
                f"{where}.max={_show(high)} is not above {where}.min={_show(low)}; the envelope needs min < max"
            )
        if "edges" in item and "bins" in item:
            raise c.fail(f"{where} gives both edges and bins; a spec gives one of them")
        if "edges" not in item and "bins" in item:
            bins = c.integer(item["bins"], f"{where}.bins", 1)
            return list(uniform_edges(float(low), float(high), bins))
        edges = c.items(item.get("edges"), f"{where}.edges", minimum=2)
        for k, value in enumerate(edges):
            c.number(value, f"{where}.edges[{k}]")
        if float(edges[0]) != float(low):
            raise c.fail(
                f"{where}.edges[0]={_show(edges[0])} differs from {where}.min={_show(low)}; the first "
                "edge must equal min"
            )
        if float(edges[-1]) != float(high):
            raise c.fail(
                f"{where}.edges[{len(edges) - 1}]={_show(edges[-1])} differs from {where}.max="
                f"{_show(high)}; the last edge must equal max"
            )
        return edges

    def rules(
        self, spec: dict[str, Any], inputs: list[dict[str, Any]], names: list[str], conservative: int
    ) -> tuple[RuleBox, ...]:
        """The legality rules as boxes, checked as the spec loader checks them (absent means none)."""
        c = self.checks
        at = "payload.spec.legality_rules"
        index = {item["name"]: i for i, item in enumerate(inputs)}
        token = {name: k for k, name in enumerate(names)}
        low = [float(item["min"]) for item in inputs]
        high = [float(item["max"]) for item in inputs]
        result: list[RuleBox] = []
        seen: dict[str, int] = {}
        for j, rule in enumerate(c.items(spec.get("legality_rules", []), at)):
            where = f"{at}[{j}]"
            rule = c.obj(rule, where, ("name", "when", "forbid"))
            name = c.text(rule["name"], f"{where}.name")
            if name in seen:
                raise c.fail(f"{where}.name={_show(name)} repeats {at}[{seen[name]}].name; rule names are unique")
            seen[name] = j
            when = c.obj(rule["when"], f"{where}.when", (), only=False)
            lower, upper = list(low), list(high)
            for key, side in when.items():
                side_at = f"{where}.when.{key}"
                if key not in index:
                    raise c.fail(f"{side_at} names no input of payload.spec.inputs ({', '.join(index)})")
                i = index[key]
                side = c.obj(side, side_at, (), only=False)
                for bound in side:
                    if bound not in ("min", "max"):
                        raise c.fail(f"{side_at}.{bound} is not min or max")
                    c.number(side[bound], f"{side_at}.{bound}")
                a, b = float(side.get("min", low[i])), float(side.get("max", high[i]))
                if a > b:
                    envelope = f"payload.spec.inputs[{i}]"
                    given_min = f"{side_at}.min={_show(side['min'])}" if "min" in side else f"{envelope}.min={low[i]!r}"
                    given_max = (
                        f"{side_at}.max={_show(side['max'])}" if "max" in side else f"{envelope}.max={high[i]!r}"
                    )
                    raise c.fail(f"{given_min} is above {given_max} (a bound the rule leaves out is the envelope's)")
                if b < low[i] or a > high[i]:
                    raise c.fail(
                        f"{side_at}={_show(side)} misses the envelope [{low[i]:g}, {high[i]:g}] of "
                        f"payload.spec.inputs[{i}]"
                    )
                lower[i], upper[i] = max(a, low[i]), min(b, high[i])
            forbidden = 0
            for k, forbid in enumerate(c.items(rule["forbid"], f"{where}.forbid")):
                if not isinstance(forbid, str) or forbid not in token:
                    raise c.fail(f"{where}.forbid[{k}]={_show(forbid)} is not one of payload.spec.outputs")
                if token[forbid] == conservative:
                    raise c.fail(
                        f"{where}.forbid[{k}]={_show(forbid)} is the conservative token, which must be "
                        "allowed in every cell"
                    )
                forbidden |= 1 << token[forbid]
            result.append(RuleBox(name, tuple(lower), tuple(upper), forbidden))
        return tuple(result)

    def gate(self, spec: dict[str, Any], n_outputs: int) -> float | None:
        """The gate's logit margin (None: no gate), consistent with its probability as `certfsm._decision` converts it.

        Only the document's consistency: whether the table's tokens fit
        this margin needs the model (``inspect --deep``).
        """
        c = self.checks
        if "confidence_gate" not in spec:
            return None
        at = "payload.spec.confidence_gate"
        gate = c.obj(spec["confidence_gate"], at, (), only=False)
        if sorted(gate) not in (["margin"], ["probability"]):
            raise c.fail(f"{at}={_show(gate)} does not give exactly one of margin and probability")
        if "margin" in gate:
            margin = c.number(gate["margin"], f"{at}.margin")
            if margin < 0:
                raise c.fail(f"{at}.margin={_show(margin)} is negative")
            return float(margin)
        probability = float(c.number(gate["probability"], f"{at}.probability"))
        if not 0.0 < probability < 1.0:
            raise c.fail(f"{at}.probability={_show(gate['probability'])} is not strictly between 0 and 1")
        margin = margin_from_probability(probability, n_outputs)
        if not math.isfinite(margin) or margin < 0:
            raise c.fail(
                f"{at}.probability={_show(gate['probability'])} gives the logit margin {margin:.6g} with "
                f"K={n_outputs} outputs; a gate needs a margin >= 0"
            )
        return margin
