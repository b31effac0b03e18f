"""The properties a controller spec asks for, as `Property` objects.

- ``token_range``: over the whole input envelope no output index whose
  token is outside ``legal_tokens`` can be chosen (ties included).
- ``legality:<rule>``: inside the rule's box no forbidden token can be
  chosen (ties included).
- With a confidence gate, each again as ``.../gated``: the illegal or
  forbidden index cannot win by the gate's margin. (The gated form is
  implied by the plain one, because a failed gate emits the conservative
  token, which the spec guarantees is legal and never forbidden; it is
  still proved on its own so that a network which only satisfies the gated
  form is certified for what it does.)

Every property is the unsafe set "some bad index is chosen", a disjunction
with one conjunction per bad index; no bad index means an empty unsafe set,
which an engine must still show UNSAT.

Every constant is the exact decimal the spec wrote (docs/semantics.md,
"Decimal constants"): the boxes are stated with `decimal_value` of the
envelope and rule bounds, and the gate with the spec's exact margin
bounds. The gated unsafe set uses the lower bound (it is the larger set,
so a proof holds for the true margin) and a witness must clear the upper
bound (so it passes the true gate); for a written margin the two are the
same decimal.
"""

from __future__ import annotations

from fractions import Fraction

from certfsm import decimal_value

from ._property import Property, chosen_conjunction


def _chosen_any(indices, spec, margin: Fraction, witness_margin: Fraction):
    return tuple(chosen_conjunction(k, spec.n_outputs, spec.decision, margin, witness_margin) for k in indices)


def spec_properties(spec) -> list[Property]:
    """The token-range and legality properties of `spec`, plain and (with a gate) gated."""
    illegal = [k for k in range(spec.n_outputs) if not spec.is_legal_index(k)]
    cases = [
        (
            "token_range",
            spec.envelope_lower,
            spec.envelope_upper,
            illegal,
            "no token outside legal_tokens ("
            + (", ".join(spec.outputs[k] for k in illegal) or "none")
            + ") is ever chosen over the input envelope",
        )
    ]
    for rule in spec.rules:
        forbidden = spec.forbidden_indices(rule)
        cases.append(
            (
                f"legality:{rule.name}",
                rule.lower,
                rule.upper,
                forbidden,
                f"inside the box of rule {rule.name!r}, {', '.join(rule.forbid)} is never chosen",
            )
        )
    margins = [(Fraction(0), Fraction(0), "")]
    if spec.gate_bounds is not None:
        margins.append((*spec.gate_bounds, "/gated"))
    properties = []
    for margin, witness_margin, suffix in margins:
        for name, lower, upper, bad, text in cases:
            if suffix:
                text += f", by a logit margin of at least {_show_margin(spec)} (confidence gate)"
            properties.append(
                Property(
                    name + suffix,
                    lower,
                    upper,
                    _chosen_any(bad, spec, margin, witness_margin),
                    description=text + " (ties included)",
                    metadata={"bad_indices": list(bad), "margin": float(margin)},
                    exact_lower=tuple(decimal_value(v) for v in lower),
                    exact_upper=tuple(decimal_value(v) for v in upper),
                )
            )
    return properties


def _show_margin(spec) -> str:
    """The gate as written: the decimal margin, or the probability's margin between its exact bounds."""
    if spec.probability is not None:
        low, high = spec.gate_bounds
        return f"ln((K-1)p/(1-p)) for p = {spec.probability!r} (between {float(low)!r} and {float(high)!r})"
    return repr(float(spec.margin))
