"""What ``certfsm inspect`` shows: a summary of an artifact and the outcome of every check, even on a bad file.

The loader stops at the first failure because the runtime must refuse;
a person auditing a file wants more. `inspect_artifact` runs the
loader's stages one by one, keeps going past a failed hash or canonical
form check so a modified file can still be read, and can compare the
certificate with the .smt2 files of a report folder.

Standard library and numpy only, like the loader, so an embedded target
can inspect what it is about to run.
"""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ._artifact import (
    _RERUN,
    Artifact,
    _check_canonical,
    _check_certificate,
    _check_hash,
    _check_signature,
    _checked,
    _envelope,
    _parse,
    _read,
)
from ._artifact_signature import signature_of
from ._artifact_checks import ARTIFACT_FORMAT_VERSION
from ._artifact_trust import required_properties
from ._canonical import sha256_hex
from ._errors import CertfsmError, ReportError
from ._signing import KeySource, trusted_key_set


@dataclass(frozen=True)
class Smt2Check:
    """One certificate entry's SMT-LIB file compared with the hash the certificate records; `found` None = missing."""

    index: int
    property: str
    file: str
    expected: str
    found: str | None

    # `property` is a field name in this class body, so the decorator is spelled out
    @builtins.property
    def is_match(self) -> bool:
        return self.found == self.expected

    def describe(self) -> str:
        if self.found is None:
            return f"certificate[{self.index}] {self.property!r}: {self.file} is missing"
        if not self.is_match:
            return (
                f"certificate[{self.index}] {self.property!r}: {self.file} hashes to {self.found[:16]}... but "
                f"the certificate records {self.expected[:16]}..."
            )
        return f"certificate[{self.index}] {self.property!r}: {self.file} matches"


def verify_smt2_files(artifact: Artifact, report: str | os.PathLike[str]) -> tuple[Smt2Check, ...]:
    """Hash each file the certificate names in the report folder `report`: the .smt2 scripts and the proof
    certificates (`VerdictRecord.proof_certificate`); entries without a file are skipped."""
    folder = Path(report)
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such report folder; give the folder certfsm distill wrote with report=")
    checks = []
    for index, entry in enumerate(artifact.certificate):
        named = ((entry.smt2, entry.smt2_sha256), (entry.proof_certificate, entry.proof_certificate_sha256))
        for file, expected in named:
            if file is None or expected is None:
                continue
            try:
                found = sha256_hex((folder / file).read_bytes())
            except OSError:
                found = None
            checks.append(Smt2Check(index, entry.property, file, expected, found))
    return tuple(checks)


@dataclass(frozen=True)
class Check:
    """One step of an inspection: `passed` is True, False, or None when an earlier failure kept it from running."""

    name: str
    passed: bool | None
    detail: str


@dataclass(frozen=True)
class Inspection:
    """What `inspect_artifact` found: summary lines (iterating yields them), each check, the artifact if it parsed.

    `is_ok` holds only when every check ran and passed (file, JSON, format,
    hash, canonical form, the signature when the file is signed or trusted
    keys were given, structure, certificate and, when a report folder was
    given, its .smt2 files); the CLI exits 0 exactly then. Without trusted
    keys a signature is shown but not verified, and the check says so.
    """

    lines: tuple[str, ...]
    checks: tuple[Check, ...]
    artifact: Artifact | None

    @property
    def is_ok(self) -> bool:
        return all(check.passed for check in self.checks)

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)


def inspect_artifact(
    path: str | os.PathLike[str],
    *,
    report: str | os.PathLike[str] | None = None,
    trusted_keys: KeySource | Iterable[KeySource] | None = None,
) -> Inspection:
    """Summarise the artifact at `path` and run every check that can run; never raises for a bad artifact.

    Unlike `load_artifact`, a failed hash or canonical-form check does not
    stop the later checks, so a person sees what is inside a modified file
    and everything else that is wrong with it. With `report`, the .smt2
    files of that report folder are compared with the certificate too.
    With `trusted_keys` (as for `load_artifact`) the signature is verified;
    a bad key file raises SigningError, since it is not the artifact's fault.
    """
    label = os.fspath(path)
    trusted = None if trusted_keys is None else trusted_key_set(trusted_keys)
    names = ["file", "JSON", "format", "sha256", "canonical form", "structure", "certificate"]
    if trusted is not None:
        names.insert(names.index("structure"), "signature")
    checks: list[Check] = []
    extra: list[str] = []

    def attempt(name: str, step: Callable[[], Any], detail: str | Callable[[Any], str]) -> tuple[bool, Any]:
        try:
            value = step()
        except CertfsmError as error:
            checks.append(Check(name, False, str(error)))
            return False, None
        checks.append(Check(name, True, detail(value) if callable(detail) else detail))
        return True, value

    artifact: Artifact | None = None
    ok, data = attempt("file", lambda: _read(path, label), lambda d: f"{len(d)} bytes read")
    if ok:
        ok, document = attempt("JSON", lambda: _parse(data, label), "ASCII JSON, finite numbers, no repeated keys")
    if ok:
        ok, envelope = attempt(
            "format", lambda: _envelope(document, label), f"certfsm artifact format {ARTIFACT_FORMAT_VERSION}"
        )
    if ok:
        recorded, payload = envelope
        attempt("sha256", lambda: _check_hash(recorded, payload, label), f"the payload hashes to {recorded}")
        attempt(
            "canonical form",
            lambda: _check_canonical(data, document, label),
            "the bytes are exactly the canonical form of their content",
        )
        signature = signature_of(document, label)
        if trusted is not None:
            attempt(
                "signature",
                lambda: _check_signature(document, payload, label, trusted),
                lambda verified: (
                    f"signed by {verified.key_id}, a trusted key; the {verified.algorithm} signature "
                    "verifies over the payload"
                ),
            )
        elif signature is not None:
            names.insert(names.index("structure"), "signature")
            checks.append(
                Check(
                    "signature",
                    True,
                    f"signed by {signature.key_id} ({signature.algorithm}); not "
                    "verified: check it against trusted public keys (KEY.pub) with "
                    "trusted_keys=",
                )
            )
        ok, artifact = attempt(
            "structure",
            lambda: _checked(payload, label, _RERUN, recorded, Path(label), signature),
            "types, ranges, lengths and cross-references are consistent",
        )
    if ok and artifact is not None:
        loaded = artifact
        attempt(
            "certificate",
            lambda: _check_certificate(loaded, label),
            f"exactly the {len(required_properties(loaded.stored_spec))} properties certfsm distill proves, each "
            "required and proved by an engine that can prove it",
        )
    report_name = None if report is None else os.fspath(report)
    if report is not None:
        names.append("smt2 files")
        if artifact is not None:
            try:
                files = verify_smt2_files(artifact, report)
            except CertfsmError as error:
                checks.append(Check("smt2 files", False, str(error)))
            else:
                bad = [f for f in files if not f.is_match]
                kinds = ".smt2 and proof certificate" if any(f.file.endswith(".cert.json") for f in files) else ".smt2"
                text = f"{len(files) - len(bad)} of {len(files)} {kinds} files in {report_name} match the certificate"
                checks.append(Check("smt2 files", not bad, text + (f"; {bad[0].describe()}" if bad else "")))
                extra = [f"  {f.describe()}" for f in files]
    done = {check.name for check in checks}
    checks += [Check(name, None, "not run: an earlier check failed") for name in names if name not in done]
    lines = _summary(artifact, label, len(data)) if artifact is not None else [f"artifact: {label}"]
    if extra:
        lines += [f"smt2 files in {report_name}:"] + extra
    lines.append("checks:")
    marks = {True: "ok", False: "FAILED", None: "not run"}
    lines += [f"  {marks[check.passed]:<8}{check.name}: {check.detail}" for check in checks]
    failed = next((check.name for check in checks if not check.passed), None)
    lines.append(
        "verdict: ok: every check passed, the artifact is certified"
        if failed is None
        else f"verdict: FAILED: the {failed} check did not pass"
    )
    return Inspection(tuple(lines), tuple(checks), artifact)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def _summary(artifact: Artifact, label: str, size: int) -> list[str]:
    spec, names = artifact.stored_spec, artifact.token_names
    lines = [
        f"artifact: {label} ({size} bytes, format {ARTIFACT_FORMAT_VERSION}, written by {artifact.created_by})",
        f"controller: {spec.name}, decision {spec.decision or 'not stated'}",
        f"model sha256: {artifact.model_sha256}",
        f"payload sha256: {artifact.sha256}",
        "signature: unsigned"
        if artifact.signature is None
        else f"signature: signed by {artifact.signature.key_id} ({artifact.signature.algorithm})",
        f"inputs ({artifact.n_inputs}):",
    ]
    for name, edges, bits in zip(spec.input_names, artifact.edges, artifact.frac_bits):
        fixed = "" if bits is None else f", frac_bits {bits}"
        lines.append(f"  {name}: {len(edges) - 1} bins over [{_number(edges[0])}, {_number(edges[-1])}]{fixed}")
    n_cells, n_exact = artifact.n_cells, int(artifact.exact.sum())
    lines.append(
        f"grid: {' x '.join(map(str, artifact.shape))} = {n_cells} cells: {n_exact} exact "
        f"({100 * n_exact / n_cells:.1f}%), {n_cells - n_exact} conservative"
    )
    proposed = np.bincount(artifact.proposal.reshape(-1), minlength=artifact.n_outputs)
    legal = set(spec.legal_tokens)
    lines.append("outputs (index: token = 4-bit code):")
    for k, name in enumerate(names):
        tags = [
            tag
            for tag, holds in (
                ("conservative", k == artifact.conservative),
                ("overridable", k in artifact.overridable),
                ("not legal", name not in legal),
            )
            if holds
        ]
        lines.append(
            f"  {k}: {name} = {artifact.codes[k]}{' (' + ', '.join(tags) + ')' if tags else ''}, "
            f"proposed in {int(proposed[k])} cells"
        )
    lines.append(
        f"machine: confirm {artifact.confirm_cycles} cycles, cooldown {artifact.cooldown_cycles} cycles, "
        f"overridable: {', '.join(names[k] for k in artifact.overridable) or 'none'}"
    )
    lines.append(
        f"certificate ({len(artifact.certificate)} {'entry' if len(artifact.certificate) == 1 else 'entries'}"
        f", {sum(e.required for e in artifact.certificate)} required):"
    )
    for j, entry in enumerate(artifact.certificate):
        where = (
            f", {entry.smt2} (sha256 {entry.smt2_sha256[:16]}...)"
            if entry.smt2 and entry.smt2_sha256
            else ", no SMT-LIB file"
        )
        if entry.proof_certificate and entry.proof_certificate_sha256:
            where += f", proof certificate {entry.proof_certificate} (sha256 {entry.proof_certificate_sha256[:16]}...)"
        lines.append(
            f"  [{j}] {entry.property}: {entry.verdict} by {entry.engine}"
            f"{', required' if entry.required else ''}{where}"
        )
    return lines
