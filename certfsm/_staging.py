"""Report folders that appear whole or not at all.

A report folder is built beside its destination and swapped in with
renames, so a failure (bad input, crash, Ctrl-C) never leaves a
half-written report: either the old folder is still there untouched, or
the new one is complete. `verify` and `distill` both write this way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from ._errors import ReportError


@contextlib.contextmanager
def staged_folder(folder: str | os.PathLike[str], *, parameter: str = "folder") -> Iterator[Path]:
    """Yield an empty staging folder beside `folder`; on a clean exit it replaces `folder`, else it is removed.

    An error names the folder and, in its fix, `parameter`: the caller's
    parameter that gave it (``report`` for a distill report folder).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ReportError(_not_a_folder(folder, parameter))
    parent = folder.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
    except OSError as error:
        raise ReportError(
            f"{folder}: cannot create the report folder ({error.strerror}); choose a writable {parameter}= path"
        ) from error
    try:
        yield staging
        os.chmod(staging, _shared_folder_mode())
        _swap_in(staging, folder, parameter)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _shared_folder_mode() -> int:
    """The mode of a folder made with mkdir: rwxr-xr-x under the usual umask.

    mkdtemp makes the staging folder private (0700); a report is meant to
    be handed to auditors, so it is opened up as a plain mkdir would be.
    """
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def _not_a_folder(folder: Path, parameter: str) -> str:
    return f"{folder}: exists and is not a folder; choose another {parameter}= path"


def _swap_in(staging: Path, folder: Path, parameter: str) -> None:
    """Replace `folder` by `staging` with renames only; the old folder goes only once the new one is in place."""
    if folder.exists() and not folder.is_dir():
        raise ReportError(_not_a_folder(folder, parameter))
    retired = None
    if folder.exists():
        retired = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.resolve().parent))
        os.rmdir(retired)
        os.rename(folder, retired)
    try:
        os.rename(staging, folder)
    except OSError:
        if retired is not None:
            os.rename(retired, folder)
        raise
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)


def write_atomically(
    path: str | os.PathLike[str], data: bytes, *, what: str, fix: str, make_parents: bool = False
) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part.

    The bytes go to a temporary file beside `path` (flushed and fsynced),
    which is then renamed over it. On any failure the temporary file is
    removed; an OSError becomes ReportError "<path>: cannot write the
    <what> (<reason>); <fix>".
    """
    path = Path(path)
    temporary = None
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException as error:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise ReportError(f"{path}: cannot write the {what} ({error.strerror or error}); {fix}") from error
        raise
