"""One verdict record for every proof certfsm makes, and the three verdicts it knows.

verify's `Result` (one property checked on a network), fsm's `Proof` (a
table or machine property) and the artifact's certificate entries are
all "a property, an engine, a verdict, a time, a file": they are this
record, or extend it with their evidence. It lives in the core because
the artifact loader reads certificate entries without any solver.

- ``proved``: the unsafe set is unreachable under the exact semantics
  (docs/semantics.md, "Verdicts");
- ``violated``: a counterexample that re-evaluates as unsafe;
- ``unknown``: anything else, with the reason; never promoted.

`seconds` and `reason` are run facts: they go to the report, never into
an artifact (`certificate_entry`), so that the same spec and model give
the same artifact bytes however loaded the machine was. Standard library
only, like everything the artifact loader imports.
"""

from __future__ import annotations

import builtins
from dataclasses import KW_ONLY, dataclass
from typing import Any, Iterable

PROVED = "proved"
VIOLATED = "violated"
UNKNOWN = "unknown"
VERDICTS = (PROVED, VIOLATED, UNKNOWN)

CERTIFICATE_ENTRY_KEYS = ("engine", "property", "required", "smt2", "smt2_sha256", "verdict")
"""The keys of one certificate entry in an artifact payload: what was proved, by what, and the file; no run facts."""
PROOF_CERTIFICATE_KEYS = ("proof_certificate", "proof_certificate_sha256")
"""Optional keys of a certificate entry, both or neither: the proof certificate (``*.cert.json`` in the report
folder, `certfsm check-proof`) that backs the entry claim by claim, and its SHA-256, so that the chain runs from
the ONNX file through the proof certificate to the artifact (and on to the Verilog summary, which names the
artifact's hash)."""


@dataclass(frozen=True)
class VerdictRecord:
    """One property's verdict, who decided it, how long it took, why, and the SMT-LIB file that re-runs it.

    `property` names what was checked ('' where the caller holds the
    property itself, as `certfsm.verify.check` callers do). `seconds` is
    None where the time is not known (an entry read back from an
    artifact, which holds no run facts). `smt2` is the file name of the
    SMT-LIB 2.6 script in the report folder and `smt2_sha256` its hash,
    both None or both set. `required`: the runtime needs this entry
    proved (see `is_certified`). `proof_certificate` and its SHA-256
    (`PROOF_CERTIFICATE_KEYS`), both None or both set, name the proof
    certificate that the independent checker re-checks for this entry.
    """

    verdict: str
    engine: str
    seconds: float | None = None
    reason: str = ""
    _: KW_ONLY
    property: str = ""
    smt2: str | None = None
    smt2_sha256: str | None = None
    required: bool = True
    proof_certificate: str | None = None
    proof_certificate_sha256: str | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} is not one of {VERDICTS}")
        if (self.smt2 is None) != (self.smt2_sha256 is None):
            raise ValueError(f"smt2={self.smt2!r} and smt2_sha256={self.smt2_sha256!r}: give both or neither")
        if (self.proof_certificate is None) != (self.proof_certificate_sha256 is None):
            raise ValueError(
                f"proof_certificate={self.proof_certificate!r} and proof_certificate_sha256="
                f"{self.proof_certificate_sha256!r}: give both or neither"
            )

    # `property` is a field name in this class body, so the decorator is spelled out
    @builtins.property
    def is_proved(self) -> bool:
        return self.verdict == PROVED

    @builtins.property
    def is_violated(self) -> bool:
        return self.verdict == VIOLATED

    def certificate_entry(self) -> dict[str, Any]:
        """This record as an artifact's certificate entry (`CERTIFICATE_ENTRY_KEYS`, and `PROOF_CERTIFICATE_KEYS`
        where set): no time, no reason."""
        entry: dict[str, Any] = {
            "property": self.property,
            "engine": self.engine,
            "verdict": self.verdict,
            "smt2": self.smt2,
            "smt2_sha256": self.smt2_sha256,
            "required": self.required,
        }
        if self.proof_certificate is not None:
            entry["proof_certificate"] = self.proof_certificate
            entry["proof_certificate_sha256"] = self.proof_certificate_sha256
        return entry

    def report_entry(self) -> dict[str, Any]:
        """This record for a report (summary.json): the certificate entry plus the run facts."""
        seconds = None if self.seconds is None else round(self.seconds, 3)
        return {**self.certificate_entry(), "seconds": seconds, "reason": self.reason}


def unproved(records: Iterable[VerdictRecord]) -> tuple[VerdictRecord, ...]:
    """The required records that are not proved."""
    return tuple(record for record in records if record.required and not record.is_proved)
