"""The error hierarchy.

One root, `CertfsmError`; every user-facing error also inherits from the
built-in exception a caller would naturally catch, so ``except ValueError``
keeps working. Messages follow one pattern: what was given, what was
expected, where (file, JSON path, ONNX node, VNN-LIB line) and the fix.
A message names a parameter as a Python caller writes it: ``port=0`` for
a value given, ``report=`` in a fix. The CLI writes each such name as the
flag that passed it (``--metrics-port 0``, ``--report``), prints the
message as one line and exits 2.
"""

from __future__ import annotations


class CertfsmError(Exception):
    """Root of every error certfsm raises on purpose."""


class SpecError(CertfsmError, ValueError):
    """A controller spec is malformed or inconsistent."""


class ModelError(CertfsmError, ValueError):
    """An ONNX model cannot be read or uses something certfsm does not support."""


class VnnlibError(CertfsmError, ValueError):
    """A VNN-LIB property file cannot be parsed or is outside the supported fragment."""


class ArtifactError(CertfsmError, ValueError):
    """A certified artifact (.cfsm) is damaged, modified, inconsistent or not backed by its proofs."""


class ReportError(CertfsmError, OSError):
    """A report folder or report file cannot be written or read back."""


class UsageError(CertfsmError, ValueError):
    """An argument has a value certfsm cannot use: named as a parameter (``probe='x'``), or by the CLI as a flag."""


class EngineError(CertfsmError, RuntimeError):
    """A solver back-end is missing or was asked for something it does not support."""


class ProbeError(CertfsmError, ValueError):
    """A probe's input is malformed: a calibration file, a trace file or a reading blob (never a reading's value)."""


class AuditLogError(CertfsmError, ValueError):
    """An audit log cannot be read (not a log, corrupt or unknown-version header), fails verification, or was given a bad record."""


class SigningError(CertfsmError, ValueError):
    """A signing key cannot be made, read or used (malformed key file, an existing key, cryptography not installed)."""


class BoxTreeError(CertfsmError, ValueError):
    """A box tree is malformed: a bad node, a threshold off its grid or outside its node, a budget exceeded."""
