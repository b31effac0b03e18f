"""`certfsm audit export`: the audit log as JSON Lines, with token and reason names beside their numbers.

The log's reader (`_audit_read`) turns bytes into records and knows no
machine, so that it runs on the standard library alone; the names come
from here: reasons from `certfsm.machine.Reason`, tokens from the
artifact the log ran. The log names its artifact only by hash, so the
artifact given must be one the log ran: its first file's, or one a logged
hot swap brought in (a swap keeps the tokens, `Controller.swap`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from certfsm import AuditLogError, UsageError
from certfsm.machine import Machine, Reason

from ._audit_format import LogHeader, SwapRecord
from ._audit_read import LogVerification, read_header, read_log
from ._audit_read import export_jsonl as export_records

REASON_NAMES = {int(reason): reason.name for reason in Reason}
"""`reason_name` by code, as the export writes it."""


def export_jsonl(
    path: str | os.PathLike[str], out: str | Path | TextIO, *, artifact: str | os.PathLike[str] | None = None
) -> LogVerification:
    """Write the log at `path` as JSON Lines to `out` (a path or a text stream) and return its verification.

    Lines: a `header` object at each file, one object per verified record
    (`kind` step, swap, override, close or refusal), then one
    `verification` object (`_audit_read.export_jsonl` states the fields).
    A step keeps its numbers (`token`, the output index; `code`; `reason`)
    and adds `reason_name` (FALLBACK_SLA) and `token_name` (KEEP); an
    override adds `token_name`. `token_name` needs `artifact` (the logged
    artifact; UsageError for another) and is null without it.
    """
    tokens = None if artifact is None else logged_tokens(path, artifact)
    return export_records(path, out, token_names=tokens, reason_names=REASON_NAMES)


def logged_tokens(path: str | os.PathLike[str], artifact: str | os.PathLike[str]) -> tuple[str, ...]:
    """The token names of `artifact`, once `check_logged_artifact` found it among the log's artifacts."""
    from certfsm import load_artifact

    machine = Machine.from_artifact(load_artifact(artifact))
    header = read_header(path)
    swapped_in: list[str] = []
    if machine.artifact_sha256 != header.artifact_sha256:  # look for it among the hot swaps
        with contextlib.suppress(AuditLogError):  # a bad record ends the search; the export then says where
            swapped_in = [record.new_sha256 for record in read_log(path) if isinstance(record, SwapRecord)]
    check_logged_artifact(machine, header, swapped_in, artifact)
    return machine.tokens


def check_logged_artifact(
    machine: Machine, header: LogHeader, swapped_in: Iterable[str], artifact: str | os.PathLike[str]
) -> None:
    """UsageError unless `machine` (loaded from `artifact`) ran in the log: the artifact of its first file's
    `header` or one a logged hot swap brought in (`swapped_in`, their hashes), with the logged inputs."""
    if machine.artifact_sha256 not in {header.artifact_sha256, *swapped_in} or machine.names != header.input_names:
        raise UsageError(
            f"artifact={os.fspath(artifact)!r}: artifact {machine.artifact_sha256[:12]} is not the one "
            f"the log names ({header.artifact_sha256[:12]}); give the artifact the log was written with"
        )
