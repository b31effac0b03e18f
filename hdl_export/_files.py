"""What the export commands share around their work: the certified machine of an artifact, output folders, hashes.

`export-verilog`, `export-c` and `check-verilog` all start from an
artifact the core loader accepts and refuse, with one line naming the
artifact, a spec the fixed-point hardware cannot take; all write into a
folder they create and record SHA-256s of the files they read and write.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from certfsm import ReportError, SpecError, load_artifact
from certfsm.machine import Machine


def spec_error_of(artifact_path, error: SpecError) -> SpecError:
    """A SpecError of the hardware structure as one line naming the artifact: the spec is fixed, then distilled."""
    return SpecError(f"{artifact_path}: {error}, then distil it again")


def certified_machine(artifact_path):
    """(artifact, machine) of a certified artifact (refused as `load_artifact` refuses it) whose inputs all have
    frac_bits, the fixed-point path the hardware runs."""
    artifact = load_artifact(artifact_path)
    machine = Machine.from_artifact(artifact)
    try:
        machine.fixed_point
    except SpecError as error:
        raise spec_error_of(artifact_path, error) from None
    return artifact, machine


def output_folder(path, what: str, parameter: str) -> Path:
    """The folder `path`, created if need be; a ReportError naming it (`what`) and, in its fix, `parameter`: the
    caller's parameter that gave it (``out`` for an export folder)."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportError(
            f"{folder}: cannot create the {what} ({error.strerror}); choose another {parameter}= path"
        ) from None
    return folder


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
