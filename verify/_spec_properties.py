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
"""

from __future__ import annotations

from ._property import Property, chosen_conjunction


def _chosen_any(indices, spec, margin: float):
    return tuple(chosen_conjunction(k, spec.n_outputs, spec.decision, margin) for k in indices)


def spec_properties(spec) -> list[Property]:
    """The token-range and legality properties of `spec`, plain and (with a gate) gated."""
    illegal = [k for k in range(spec.n_outputs) if not spec.is_legal_index(k)]
    cases = [("token_range", spec.envelope_lower, spec.envelope_upper, illegal,
              "no token outside legal_tokens ("
              + (", ".join(spec.outputs[k] for k in illegal) or "none")
              + ") is ever chosen over the input envelope")]
    for rule in spec.rules:
        forbidden = spec.forbidden_indices(rule)
        cases.append((f"legality:{rule.name}", rule.lower, rule.upper, forbidden,
                      f"inside the box of rule {rule.name!r}, {', '.join(rule.forbid)} is never chosen"))
    margins = [(0.0, "")]
    if spec.margin is not None:
        margins.append((spec.margin, "/gated"))
    properties = []
    for margin, suffix in margins:
        for name, lower, upper, bad, text in cases:
            if suffix:
                text += f", by a logit margin of at least {margin:.6g} (confidence gate)"
            properties.append(Property(
                name + suffix, lower, upper, _chosen_any(bad, spec, margin),
                description=text + " (ties included)",
                metadata={"bad_indices": list(bad), "margin": margin},
            ))
    return properties
