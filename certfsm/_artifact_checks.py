"""What a valid artifact payload is: the structural checks that the loader and the writer share.

Both run the same checks, so the writer cannot write what the loader
refuses. They cover types, ranges and lengths, and the cross-references:
the grid and machine agree with the spec, every cell allows the
conservative token and only legal tokens, every proposal is allowed in
its cell, every conservative cell holds the conservative token, and what
`certfsm._artifact_trust` re-derives from the spec (edges, rules, allowed
masks equal to the rules', the gate). The
first failure raises one ArtifactError naming the JSON path, the value
and the rule; the caller supplies the file label and the fix, because a
damaged file and a buggy producer need different advice.

Standard library and numpy only, like every module an artifact loader
imports.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from ._arrays import frozen_array
from ._artifact_trust import RuleBox, SpecDerivation
from ._errors import ArtifactError
from ._verdict import CERTIFICATE_ENTRY_KEYS, VERDICTS
from .machine import bins_met, cell_allowed_masks


ARTIFACT_FORMAT_VERSION = 2
"""2: certificate entries hold no ``seconds`` (run facts live in the report, so the same spec and model give the
same bytes); 1 had them."""
MAX_FRAC_BITS = 24

_PAYLOAD_KEYS = ("certificate", "created_by", "grid", "machine", "model_sha256", "spec", "table")
_ENTRY_KEYS = CERTIFICATE_ENTRY_KEYS
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SMT2_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.smt2")


def _show(value: Any) -> str:
    """A JSON value as it appears in the file, cut to 60 characters."""
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    for kinds, name in (
        (type(None), "null"),
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "an object"),
    ):
        if isinstance(value, kinds):
            return name
    return f"a {type(value).__name__}"


def _same_numbers(given: Any, edges: list) -> bool:
    return (
        isinstance(given, list)
        and len(given) == len(edges)
        and all(type(a) in (int, float) and a == b for a, b in zip(given, edges))
    )


class _Structure:
    """The structural checks of a parsed payload; `fields()` returns the typed values or raises at the first failure.

    Order: the payload's keys, model_sha256, created_by, grid, machine,
    the spec against grid and machine, table, certificate. In the table:
    the three lengths, then each list's values, then the cells in order
    (at one cell: conservative token allowed, only legal tokens allowed,
    proposal allowed, conservative cell holds the conservative token, the
    mask is the one the spec's legality rules give).
    """

    def __init__(self, payload: Any, label: str, fix: str) -> None:
        self.payload, self.label, self.fix = payload, label, fix

    def fail(self, text: str) -> ArtifactError:
        return ArtifactError(f"{self.label}: {text}; {self.fix}")

    def obj(self, value: Any, where: str, keys: tuple[str, ...], *, only: bool = True) -> dict:
        if not isinstance(value, dict):
            raise self.fail(f"{where} is {_kind(value)}, expected an object with the keys {', '.join(keys)}")
        for key in keys:
            if key not in value:
                raise self.fail(f"{where}.{key} is missing")
        for key in value if only else ():
            if key not in keys:
                raise self.fail(
                    f"{where}.{key} is not a field of artifact format {ARTIFACT_FORMAT_VERSION} "
                    f"(expected only {', '.join(keys)})"
                )
        return value

    def items(self, value: Any, where: str, *, length: int | None = None, of: str = "", minimum: int = 0) -> list:
        if not isinstance(value, list):
            raise self.fail(f"{where} is {_kind(value)}, expected a list")
        if length is not None and len(value) != length:
            raise self.fail(f"{where} has {len(value)} entries but {of}")
        if len(value) < minimum:
            raise self.fail(f"{where} has {len(value)} entries, expected at least {minimum}")
        return value

    def integer(self, value: Any, where: str, low: int, high: int | None = None, what: str = "") -> int:
        if type(value) is not int or value < low or (high is not None and value > high):
            expected = what or (f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}")
            raise self.fail(f"{where}={_show(value)} is not {expected}")
        return value

    def number(self, value: Any, where: str) -> float:
        if type(value) is int and abs(value) > 2**53:
            raise self.fail(f"{where}={_show(value)} is an integer beyond float64's exact range (2^53)")
        if type(value) not in (int, float) or not math.isfinite(value):
            raise self.fail(f"{where}={_show(value)} is not a finite number")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(f"{where}={_show(value)} is not a non-empty string")
        return value

    def digest(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not _HEX64.fullmatch(value):
            raise self.fail(f"{where}={_show(value)} is not a SHA-256 (64 lowercase hex digits)")
        return value

    def fields(self) -> dict[str, Any]:
        """The checked values under the field names of `Artifact` (all but path and sha256).

        Arrays are read-only; `spec` is the payload's spec object as given;
        `certificate` is a tuple of dicts under the field names of
        `certfsm._verdict.VerdictRecord`. The caller builds those types, which keeps this
        module free of the loader.
        """
        payload = self.obj(self.payload, "payload", _PAYLOAD_KEYS)
        model_sha256 = self.digest(payload["model_sha256"], "payload.model_sha256")
        created_by = self.text(payload["created_by"], "payload.created_by")
        if not created_by.startswith("certfsm "):
            raise self.fail(f"payload.created_by={_show(created_by)} does not start with 'certfsm '")
        edges, frac_bits = self.grid(payload["grid"])
        codes, conservative, confirm, cooldown, overridable = self.machine(payload["machine"])
        names, legal_mask, rules = self.spec(
            payload["spec"], edges, frac_bits, codes, conservative, confirm, cooldown, overridable
        )
        shape = tuple(len(row) - 1 for row in edges)
        proposal, exact, allowed = self.table(payload["table"], shape, names, conservative, legal_mask, (edges, rules))
        return dict(
            spec=payload["spec"],
            model_sha256=model_sha256,
            edges=tuple(frozen_array(row, np.float64) for row in edges),
            frac_bits=tuple(frac_bits),
            proposal=proposal,
            exact=exact,
            allowed=allowed,
            conservative=conservative,
            confirm_cycles=confirm,
            cooldown_cycles=cooldown,
            overridable=tuple(overridable),
            codes=tuple(codes),
            certificate=self.certificate(payload["certificate"]),
            created_by=created_by,
        )

    def grid(self, grid: Any) -> tuple[list[list], list]:
        grid = self.obj(grid, "payload.grid", ("edges", "frac_bits"))
        rows = self.items(grid["edges"], "payload.grid.edges", minimum=1)
        for i, row in enumerate(rows):
            at = f"payload.grid.edges[{i}]"
            self.items(row, at, minimum=2)
            for k, value in enumerate(row):
                self.number(value, f"{at}[{k}]")
                if k and not value > row[k - 1]:
                    raise self.fail(
                        f"{at}[{k}]={_show(value)} is not above {at}[{k - 1}]={_show(row[k - 1])}; "
                        "bin edges are strictly increasing"
                    )
        bits = self.items(
            grid["frac_bits"],
            "payload.grid.frac_bits",
            length=len(rows),
            of=f"payload.grid.edges has {len(rows)} inputs",
        )
        for i, value in enumerate(bits):
            if value is not None:
                self.integer(
                    value,
                    f"payload.grid.frac_bits[{i}]",
                    0,
                    MAX_FRAC_BITS,
                    f"null or an integer from 0 to {MAX_FRAC_BITS}",
                )
        return rows, bits

    def machine(self, machine: Any) -> tuple[list[int], int, int, int, list[int]]:
        at = "payload.machine"
        machine = self.obj(machine, at, ("codes", "confirm_cycles", "conservative", "cooldown_cycles", "overridable"))
        codes = self.items(machine["codes"], f"{at}.codes", minimum=2)
        owner: dict[int, int] = {}
        for k, code in enumerate(codes):
            self.integer(code, f"{at}.codes[{k}]", 0, 15)
            if code in owner:
                raise self.fail(
                    f"{at}.codes[{k}]={code} repeats {at}.codes[{owner[code]}]; each output needs its own 4-bit code"
                )
            owner[code] = k
        conservative = self.integer(machine["conservative"], f"{at}.conservative", 0, len(codes) - 1)
        confirm = self.integer(machine["confirm_cycles"], f"{at}.confirm_cycles", 1)
        cooldown = self.integer(machine["cooldown_cycles"], f"{at}.cooldown_cycles", 0)
        overridable = self.items(machine["overridable"], f"{at}.overridable")
        for j, index in enumerate(overridable):
            self.integer(index, f"{at}.overridable[{j}]", 0, len(codes) - 1)
            if j and not index > overridable[j - 1]:
                raise self.fail(
                    f"{at}.overridable[{j}]={index} is not above {at}.overridable[{j - 1}]="
                    f"{overridable[j - 1]}; list output indices ascending, each once"
                )
        return codes, conservative, confirm, cooldown, overridable

    def spec(
        self, spec: Any, edges, frac_bits, codes, conservative, confirm, cooldown, overridable
    ) -> tuple[list[str], int, tuple[RuleBox, ...]]:
        """Check the spec's fields that grid and machine repeat, its rules and gate (`certfsm._artifact_trust`);
        returns the token names, the legal-token mask and the legality rules."""
        at = "payload.spec"
        spec = self.obj(
            spec,
            at,
            (
                "certfsm_spec",
                "name",
                "inputs",
                "outputs",
                "tokens",
                "legal_tokens",
                "conservative_token",
                "hysteresis",
                "overrides",
            ),
            only=False,
        )
        if type(spec["certfsm_spec"]) is not int or spec["certfsm_spec"] != 1:
            raise self.fail(f"{at}.certfsm_spec={_show(spec['certfsm_spec'])} is not spec format 1")
        self.text(spec["name"], f"{at}.name")
        names = self.items(
            spec["outputs"], f"{at}.outputs", length=len(codes), of=f"payload.machine.codes has {len(codes)}"
        )
        index: dict[str, int] = {}
        for k, name in enumerate(names):
            self.text(name, f"{at}.outputs[{k}]")
            if name in index:
                raise self.fail(
                    f"{at}.outputs[{k}]={_show(name)} repeats {at}.outputs[{index[name]}]; token names are unique"
                )
            index[name] = k
        tokens = self.obj(spec["tokens"], f"{at}.tokens", tuple(names))
        for k, name in enumerate(names):
            if type(tokens[name]) is not int or tokens[name] != codes[k]:
                raise self.fail(
                    f"{at}.tokens.{name}={_show(tokens[name])} differs from payload.machine.codes[{k}]="
                    f"{codes[k]}; the machine must emit the spec's codes"
                )
        if spec["conservative_token"] != names[conservative]:
            raise self.fail(
                f"{at}.conservative_token={_show(spec['conservative_token'])} differs from "
                f"payload.machine.conservative={conservative} ({names[conservative]})"
            )
        legal_mask = 0
        for k, name in enumerate(self.items(spec["legal_tokens"], f"{at}.legal_tokens")):
            if not isinstance(name, str) or name not in index:
                raise self.fail(f"{at}.legal_tokens[{k}]={_show(name)} is not one of {at}.outputs")
            legal_mask |= 1 << index[name]
        if not legal_mask >> conservative & 1:
            raise self.fail(f"the conservative token {names[conservative]} is not in {at}.legal_tokens")
        inputs = self.items(
            spec["inputs"], f"{at}.inputs", length=len(edges), of=f"payload.grid.edges has {len(edges)} inputs"
        )
        derive = SpecDerivation(self)
        seen_inputs: dict[str, int] = {}
        for i, item in enumerate(inputs):
            where = f"{at}.inputs[{i}]"
            item = self.obj(item, where, ("name", "min", "max"), only=False)
            if not _same_numbers(derive.input_edges(item, where), edges[i]):
                raise self.fail(
                    f"{where}.edges differs from payload.grid.edges[{i}]; the grid must be the spec's bin edges"
                )
            given = item.get("frac_bits")
            if given != frac_bits[i] or type(given) is not type(frac_bits[i]):
                raise self.fail(
                    f"{where}.frac_bits={_show(given)} differs from payload.grid.frac_bits[{i}]={_show(frac_bits[i])}"
                )
            if item["name"] in seen_inputs:
                raise self.fail(
                    f"{where}.name={_show(item['name'])} repeats {at}.inputs[{seen_inputs[item['name']]}]"
                    ".name; input names are unique"
                )
            seen_inputs[item["name"]] = i
        hysteresis = self.obj(spec["hysteresis"], f"{at}.hysteresis", ("confirm_cycles", "cooldown_cycles"), only=False)
        for key, value in (("confirm_cycles", confirm), ("cooldown_cycles", cooldown)):
            if type(hysteresis[key]) is not int or hysteresis[key] != value:
                raise self.fail(
                    f"{at}.hysteresis.{key}={_show(hysteresis[key])} differs from payload.machine.{key}={value}"
                )
        overrides = self.obj(spec["overrides"], f"{at}.overrides", ("overridable",), only=False)
        expected = [names[k] for k in overridable]
        if overrides["overridable"] != expected:
            raise self.fail(
                f"{at}.overrides.overridable={_show(overrides['overridable'])} differs from "
                f"payload.machine.overridable={overridable} ({', '.join(expected) or 'none'})"
            )
        for k in overridable:
            if not legal_mask >> k & 1:
                raise self.fail(
                    f"payload.machine.overridable lists {names[k]} (output {k}), which is not in "
                    f"{at}.legal_tokens; an override may force only legal tokens"
                )
        derive.gate(spec, len(names))
        return names, legal_mask, derive.rules(spec, inputs, names, conservative)

    def table(
        self,
        table: Any,
        shape: tuple[int, ...],
        names: list[str],
        conservative: int,
        legal_mask: int,
        geometry: tuple[list, tuple[RuleBox, ...]],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        at = "payload.table"
        n_cells, n_outputs = math.prod(shape), len(names)
        table = self.obj(table, at, ("allowed", "proposal", "status"))
        grid = f"the grid has {n_cells} cells"
        proposal = self.items(table["proposal"], f"{at}.proposal", length=n_cells, of=grid)
        status = table["status"]
        if not isinstance(status, str):
            raise self.fail(f"{at}.status is {_kind(status)}, expected a string of one 'e' or 'c' per cell")
        if len(status) != n_cells:
            raise self.fail(f"{at}.status has {len(status)} characters but {grid}")
        allowed = self.items(table["allowed"], f"{at}.allowed", length=n_cells, of=grid)
        for k, value in enumerate(proposal):
            if type(value) is not int or not 0 <= value < n_outputs:
                self.integer(value, f"{at}.proposal[{k}]", 0, n_outputs - 1, f"an output index 0..{n_outputs - 1}")
        wrong = re.search(r"[^ec]", status)
        if wrong:
            raise self.fail(
                f"{at}.status[{wrong.start()}]={wrong.group()!r} is neither 'e' (exact) nor 'c' (conservative)"
            )
        full = (1 << n_outputs) - 1
        for k, value in enumerate(allowed):
            if type(value) is not int or not 0 <= value <= full:
                self.integer(
                    value,
                    f"{at}.allowed[{k}]",
                    0,
                    full,
                    f"a bitmask over {n_outputs} outputs (an integer from 0 to {full})",
                )
        chosen = frozen_array(proposal, np.int64).reshape(shape)
        masks = frozen_array(allowed, np.int64).reshape(shape)
        exact = frozen_array(np.frombuffer(status.encode("ascii"), dtype=np.uint8) == ord("e"), bool).reshape(shape)
        self.cells(
            chosen.reshape(-1), masks.reshape(-1), exact.reshape(-1), shape, names, conservative, legal_mask, geometry
        )
        return chosen, exact, masks

    def cells(self, chosen, masks, exact, shape, names, conservative, legal_mask, geometry) -> None:
        at = "payload.table"
        edges, rules = geometry
        expected = np.array(
            cell_allowed_masks(edges, legal_mask, [(r.lower, r.upper, r.forbidden) for r in rules]), dtype=np.int64
        )

        def rules_at(k: int, token: int) -> str:
            bins = np.unravel_index(k, shape)
            met = [
                repr(r.name)
                for r in rules
                if r.forbidden >> token & 1
                and all(int(b) in bins_met(e, lo, hi) for b, e, lo, hi in zip(bins, edges, r.lower, r.upper))
            ]
            return (
                f"rule {' and rule '.join(met)} of payload.spec.legality_rules forbids"
                if met
                else "payload.spec.legality_rules forbids"
            )

        def difference(k: int) -> str:
            extra, missing = int(masks[k]) & ~int(expected[k]), int(expected[k]) & ~int(masks[k])
            if extra:
                token = (extra & -extra).bit_length() - 1
                return f"it allows {names[token]}, which {rules_at(k, token)} there"
            token = (missing & -missing).bit_length() - 1
            return f"it forbids {names[token]}, which no rule of payload.spec.legality_rules forbids there"

        def cell(k: int) -> str:
            return f"cell {k} (bins {', '.join(str(int(b)) for b in np.unravel_index(k, shape))})"

        def tokens(mask: int) -> str:
            return ", ".join(name for i, name in enumerate(names) if mask >> i & 1) or "none"

        def token(k: int) -> str:
            return f"{int(chosen[k])} ({names[int(chosen[k])]})"

        problems = (
            (
                (masks >> conservative) & 1 == 0,
                lambda k: (
                    f"{at}.allowed[{k}]={int(masks[k])} does not allow the conservative token "
                    f"{names[conservative]} in {cell(k)}; the fallback must be allowed in every cell"
                ),
            ),
            (
                masks & ~legal_mask != 0,
                lambda k: (
                    f"{at}.allowed[{k}]={int(masks[k])} allows {tokens(int(masks[k]) & ~legal_mask)} in "
                    f"{cell(k)}, which payload.spec.legal_tokens does not list; a cell allows only legal tokens"
                ),
            ),
            (
                (masks >> chosen) & 1 == 0,
                lambda k: (
                    f"{at}.proposal[{k}]={token(k)} is not allowed in {cell(k)} (allowed there: "
                    f"{tokens(int(masks[k]))}); the table may propose only an allowed token"
                ),
            ),
            (
                ~exact & (chosen != conservative),
                lambda k: (
                    f"{at}.proposal[{k}]={token(k)} in {cell(k)}, whose status is 'c' (conservative); a "
                    f"conservative cell holds the conservative token {conservative} ({names[conservative]})"
                ),
            ),
            (
                masks != expected,
                lambda k: (
                    f"{at}.allowed[{k}]={int(masks[k])} in {cell(k)} differs from the mask {int(expected[k])} "
                    f"that the spec's legality rules give: {difference(k)}"
                ),
            ),
        )
        first = None
        for failing, message in problems:
            hits = np.flatnonzero(failing)
            if hits.size and (first is None or hits[0] < first[0]):
                first = (int(hits[0]), message)
        if first is not None:
            raise self.fail(first[1](first[0]))

    def certificate(self, certificate: Any) -> tuple[dict[str, Any], ...]:
        entries = self.items(certificate, "payload.certificate", minimum=1)
        result, seen = [], {}
        for j, entry in enumerate(entries):
            at = f"payload.certificate[{j}]"
            entry = self.obj(entry, at, _ENTRY_KEYS)
            name = self.text(entry["property"], f"{at}.property")
            if name in seen:
                raise self.fail(
                    f"{at}.property={_show(name)} repeats payload.certificate[{seen[name]}]; list each property once"
                )
            seen[name] = j
            engine = self.text(entry["engine"], f"{at}.engine")
            if entry["verdict"] not in VERDICTS:
                raise self.fail(f"{at}.verdict={_show(entry['verdict'])} is not one of {', '.join(VERDICTS)}")
            smt2, digest = entry["smt2"], entry["smt2_sha256"]
            if smt2 is not None and (not isinstance(smt2, str) or not _SMT2_NAME.fullmatch(smt2)):
                raise self.fail(
                    f"{at}.smt2={_show(smt2)} is neither null nor a plain .smt2 file name (letters, "
                    "digits, '_', '.', '-'; no folders)"
                )
            if smt2 is None and digest is not None:
                raise self.fail(f"{at}.smt2_sha256 is set but {at}.smt2 is null; give both or neither")
            if smt2 is not None:
                self.digest(digest, f"{at}.smt2_sha256")
            if type(entry["required"]) is not bool:
                raise self.fail(f"{at}.required={_show(entry['required'])} is not true or false")
            result.append(
                dict(
                    property=name,
                    engine=engine,
                    verdict=entry["verdict"],
                    smt2=smt2,
                    smt2_sha256=digest,
                    required=entry["required"],
                )
            )
        if not any(entry["required"] for entry in result):
            raise self.fail("payload.certificate has no entry with required=true, so no proof backs the artifact")
        return tuple(result)
