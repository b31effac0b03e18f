"""The loader's reading of the spec an artifact stores: checked against grid and machine, returned as a `StoredSpec`.

The spec document is hashed as written and kept so (`Artifact.spec`);
this reading is the one place that walks it. It checks the fields that
grid and machine repeat, re-derives the edges, the legality rules and the
gate (`certfsm._artifact_trust.SpecDerivation`), reads the SLA paths'
shape and returns every field a reader needs as one frozen
`certfsm.StoredSpec`.

Standard library only (with the checks' numpy-free part), like every
module an artifact loader imports.
"""

from __future__ import annotations

from typing import Any

from ._artifact_checks import PayloadChecks, _show
from ._artifact_trust import SpecDerivation
from ._box_tree import MAX_TREE_DEPTH, MAX_TREE_LEAVES, TreeBudget
from ._sla_path import SlaPath
from ._stored_spec import StoredInput, StoredSpec

_SPEC_KEYS = (
    "certfsm_spec",
    "name",
    "inputs",
    "outputs",
    "tokens",
    "legal_tokens",
    "conservative_token",
    "hysteresis",
    "overrides",
)
_SLA_PATH_KEYS = ("name", "metric", "limit", "window", "max_violations", "recovery_cycles")
_SLA_PATH_OPTIONAL_KEYS = ("tokens", "statistic")


def _same_numbers(given: Any, edges: list[float]) -> bool:
    return (
        isinstance(given, list)
        and len(given) == len(edges)
        and all(type(a) in (int, float) and a == b for a, b in zip(given, edges))
    )


def read_spec(
    checks: PayloadChecks,
    spec: Any,
    edges: list[list[float]],
    frac_bits: list[int | None],
    codes: list[int],
    conservative: int,
    confirm: int,
    cooldown: int,
    overridable: list[int],
) -> StoredSpec:
    """Check the spec's fields that grid and machine repeat, its rules and gate; return it typed.

    `edges` and `frac_bits` are the grid's, the rest the machine's, as
    already read.
    """
    at = "payload.spec"
    spec = checks.obj(spec, at, _SPEC_KEYS, only=False)
    if type(spec["certfsm_spec"]) is not int or spec["certfsm_spec"] != 1:
        raise checks.fail(f"{at}.certfsm_spec={_show(spec['certfsm_spec'])} is not spec format 1")
    name = checks.text(spec["name"], f"{at}.name")
    names = checks.items(
        spec["outputs"], f"{at}.outputs", length=len(codes), of=f"payload.machine.codes has {len(codes)}"
    )
    index: dict[str, int] = {}
    for k, output in enumerate(names):
        checks.text(output, f"{at}.outputs[{k}]")
        if output in index:
            raise checks.fail(
                f"{at}.outputs[{k}]={_show(output)} repeats {at}.outputs[{index[output]}]; token names are unique"
            )
        index[output] = k
    tokens = checks.obj(spec["tokens"], f"{at}.tokens", tuple(names))
    for k, output in enumerate(names):
        if type(tokens[output]) is not int or tokens[output] != codes[k]:
            raise checks.fail(
                f"{at}.tokens.{output}={_show(tokens[output])} differs from payload.machine.codes[{k}]="
                f"{codes[k]}; the machine must emit the spec's codes"
            )
    if spec["conservative_token"] != names[conservative]:
        raise checks.fail(
            f"{at}.conservative_token={_show(spec['conservative_token'])} differs from "
            f"payload.machine.conservative={conservative} ({names[conservative]})"
        )
    legal: list[int] = []
    for k, token in enumerate(checks.items(spec["legal_tokens"], f"{at}.legal_tokens")):
        if not isinstance(token, str) or token not in index:
            raise checks.fail(f"{at}.legal_tokens[{k}]={_show(token)} is not one of {at}.outputs")
        legal.append(index[token])
    if conservative not in legal:
        raise checks.fail(f"the conservative token {names[conservative]} is not in {at}.legal_tokens")
    derive = SpecDerivation(checks)
    inputs = _read_inputs(checks, spec["inputs"], edges, frac_bits, derive)
    hysteresis = checks.obj(spec["hysteresis"], f"{at}.hysteresis", ("confirm_cycles", "cooldown_cycles"), only=False)
    for key, value in (("confirm_cycles", confirm), ("cooldown_cycles", cooldown)):
        if type(hysteresis[key]) is not int or hysteresis[key] != value:
            raise checks.fail(
                f"{at}.hysteresis.{key}={_show(hysteresis[key])} differs from payload.machine.{key}={value}"
            )
    overrides = checks.obj(spec["overrides"], f"{at}.overrides", ("overridable",), only=False)
    expected = [names[k] for k in overridable]
    if overrides["overridable"] != expected:
        raise checks.fail(
            f"{at}.overrides.overridable={_show(overrides['overridable'])} differs from "
            f"payload.machine.overridable={overridable} ({', '.join(expected) or 'none'})"
        )
    for k in overridable:
        if k not in legal:
            raise checks.fail(
                f"payload.machine.overridable lists {names[k]} (output {k}), which is not in "
                f"{at}.legal_tokens; an override may force only legal tokens"
            )
    gate_margin = derive.gate(spec, len(names))
    rules = derive.rules(spec, spec["inputs"], names, conservative)
    return StoredSpec(
        name=name,
        decision=_read_decision(checks, spec),
        inputs=inputs,
        outputs=tuple(names),
        codes=tuple(codes),
        legal=tuple(legal),
        conservative=conservative,
        confirm_cycles=confirm,
        cooldown_cycles=cooldown,
        overridable=tuple(overridable),
        rules=rules,
        gate_margin=gate_margin,
        sla_paths=_read_sla_paths(checks, spec.get("sla")),
        refine=_read_refine(checks, spec),
    )


def _read_refine(checks: PayloadChecks, spec: dict[str, Any]) -> TreeBudget | None:
    """The budget of a refined table (absent: none; the spec loader writes no refine object without one)."""
    if "refine" not in spec:
        return None
    at = "payload.spec.refine"
    refine = checks.obj(spec["refine"], at, ("max_depth", "max_leaves"))
    return TreeBudget(
        checks.integer(refine["max_depth"], f"{at}.max_depth", 1, MAX_TREE_DEPTH),
        checks.integer(refine["max_leaves"], f"{at}.max_leaves", 2, MAX_TREE_LEAVES),
    )


def _read_inputs(
    checks: PayloadChecks,
    inputs: Any,
    edges: list[list[float]],
    frac_bits: list[int | None],
    derive: SpecDerivation,
) -> tuple[StoredInput, ...]:
    """Each input's name, unit, envelope and frac_bits; its edges must be the grid's."""
    at = "payload.spec"
    items = checks.items(inputs, f"{at}.inputs", length=len(edges), of=f"payload.grid.edges has {len(edges)} inputs")
    result: list[StoredInput] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"{at}.inputs[{i}]"
        item = checks.obj(item, where, ("name", "min", "max"), only=False)
        if not _same_numbers(derive.input_edges(item, where), edges[i]):
            raise checks.fail(
                f"{where}.edges differs from payload.grid.edges[{i}]; the grid must be the spec's bin edges"
            )
        given = item.get("frac_bits")
        if given != frac_bits[i] or type(given) is not type(frac_bits[i]):
            raise checks.fail(
                f"{where}.frac_bits={_show(given)} differs from payload.grid.frac_bits[{i}]={_show(frac_bits[i])}"
            )
        if item["name"] in seen:
            raise checks.fail(
                f"{where}.name={_show(item['name'])} repeats {at}.inputs[{seen[item['name']]}].name; input names "
                "are unique"
            )
        seen[item["name"]] = i
        unit = item.get("unit", "")
        if not isinstance(unit, str):
            raise checks.fail(f"{where}.unit={_show(unit)} is not a string")
        result.append(StoredInput(item["name"], unit, float(item["min"]), float(item["max"]), frac_bits[i]))
    return tuple(result)


def _read_decision(checks: PayloadChecks, spec: dict[str, Any]) -> str | None:
    """The decision rule's name as stored (None when the document has none); the runtime does not use it."""
    if "decision" not in spec:
        return None
    return checks.text(spec["decision"], "payload.spec.decision")


def _read_sla_paths(checks: PayloadChecks, sla: Any) -> tuple[SlaPath, ...]:
    """The SLA paths' shape (absent or null: none); `certfsm.sla.check_path` checks their meaning."""
    at = "payload.spec.sla"
    if sla is None:
        return ()
    sla = checks.obj(sla, at, (), only=False)
    result: list[SlaPath] = []
    for j, path in enumerate(checks.items(sla.get("paths", []), f"{at}.paths")):
        where = f"{at}.paths[{j}]"
        path = checks.obj(path, where, _SLA_PATH_KEYS, optional=_SLA_PATH_OPTIONAL_KEYS)
        for key in ("window", "max_violations", "recovery_cycles"):
            if type(path[key]) is not int:
                raise checks.fail(f"{where}.{key}={_show(path[key])} is not an integer")
        tokens = path.get("tokens")
        if tokens is not None:
            for k, token in enumerate(checks.items(tokens, f"{where}.tokens")):
                checks.text(token, f"{where}.tokens[{k}]")
        statistic = path.get("statistic", "value")
        result.append(
            SlaPath(
                name=checks.text(path["name"], f"{where}.name"),
                metric=checks.text(path["metric"], f"{where}.metric"),
                limit=checks.number(path["limit"], f"{where}.limit"),
                window=path["window"],
                max_violations=path["max_violations"],
                recovery_cycles=path["recovery_cycles"],
                tokens=tuple(tokens) if tokens else None,
                statistic=checks.text(statistic, f"{where}.statistic"),
            )
        )
    return tuple(result)
