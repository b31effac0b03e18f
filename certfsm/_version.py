"""The version of certfsm that wrote a file: one definition for `certfsm --version`, the SMT-LIB headers, the
distill report and the artifact's `created_by`, so that no two of them can disagree."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

UNKNOWN_VERSION = "unknown"
"""What a source tree that pip did not install reports: a file never claims a version it cannot know."""


def certfsm_version() -> str:
    """The installed distribution's version: the toolkit (`certfsm`) or the runtime alone (`certfsm-runtime`)."""
    for distribution in ("certfsm", "certfsm-runtime"):
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return UNKNOWN_VERSION
