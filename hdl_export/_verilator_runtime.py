"""Verilator's run-time library, compiled once per Verilator, compiler and flags, and linked into every bench.

`verilator --binary` compiles two things into obj_dir: the model of the
module and bench (small) and three files of Verilator's own run-time
library (verilated.cpp, verilated_timing.cpp, verilated_threads.cpp),
about 6 s of g++ on a 2-core machine, four fifths of every build. Those
objects depend only on the Verilator install, the compiler and the flags
of the build, never on the module. So after a build that succeeded
without them they are kept in a cache folder named by a hash of those
three (`_key`), and the next build copies them into its obj_dir and tells
make to take them as they are (``--assume-old``; make would otherwise
rebuild them, since they depend on the model's freshly written .mk).

Why this cannot make a check pass that should fail: the cached objects
are Verilator's library, not the module under test, and the bench checks
every step itself. A build that fails with cached objects is run again
without them, and that cache entry is dropped, so a damaged entry costs
one build, never a verdict. Where the cache folder cannot be written,
builds go on without it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

OBJECTS = ("verilated.o", "verilated_timing.o", "verilated_threads.o")


def cache_root() -> Path | None:
    """$CERTFSM_CACHE, else $XDG_CACHE_HOME/certfsm, else ~/.cache/certfsm; None where there is no home to use."""
    if os.environ.get("CERTFSM_CACHE"):
        return Path(os.environ["CERTFSM_CACHE"])
    try:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "certfsm"
    except (RuntimeError, KeyError):  # no HOME and no password entry: build without the cache
        return None


def _entry(key: str | None) -> Path | None:
    root = cache_root()
    return None if key is None or root is None else root / "verilator-runtime" / key


@functools.cache
def _key(verilator: tuple[str, ...], flags: tuple[str, ...]) -> str | None:
    """A hash of what the objects depend on: Verilator's version and sources, the compiler, the flags."""
    try:
        root = subprocess.run([*verilator, "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True, timeout=60)
        version = subprocess.run([*verilator, "--version"], capture_output=True, text=True, timeout=60)
        compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    include = Path(root.stdout.strip()) / "include"
    if root.returncode != 0 or not include.is_dir():
        return None
    digest = hashlib.sha256()
    for text in (version.stdout, compiler.stdout, shutil.which("c++") or "", *flags):
        digest.update(text.encode() + b"\0")
    for source in sorted(include.rglob("*")):
        if source.is_file() and source.suffix in (".h", ".cpp", ".mk"):
            digest.update(str(source.relative_to(include)).encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:32]


def restore(obj_dir: Path, verilator: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    """Copy the cached objects into `obj_dir`; the make arguments that keep them, or [] when none are cached."""
    entry = _entry(_key(verilator, flags))
    if entry is None or not all((entry / name).is_file() for name in OBJECTS):
        return []
    obj_dir.mkdir(parents=True, exist_ok=True)
    for name in OBJECTS:
        shutil.copyfile(entry / name, obj_dir / name)
    return [argument for name in OBJECTS for argument in ("-MAKEFLAGS", f"--assume-old={name}")]


def keep(obj_dir: Path, verilator: tuple[str, ...], flags: tuple[str, ...]) -> None:
    """Store the objects a successful build made; each file appears whole or not at all (rename)."""
    entry = _entry(_key(verilator, flags))
    if entry is None or not all((obj_dir / name).is_file() for name in OBJECTS):
        return
    try:
        entry.mkdir(parents=True, exist_ok=True)
        for name in OBJECTS:
            with tempfile.NamedTemporaryFile(dir=entry, prefix=f".{name}.", delete=False) as partial:
                partial.write((obj_dir / name).read_bytes())
            os.replace(partial.name, entry / name)
    except OSError:
        return


def drop(verilator: tuple[str, ...], flags: tuple[str, ...]) -> None:
    """Forget the cached objects (a build with them failed)."""
    entry = _entry(_key(verilator, flags))
    if entry is not None:
        shutil.rmtree(entry, ignore_errors=True)
