"""Section sizes of an ELF32 object, read from its section headers with the standard library only.

The ``cortex_m_size`` check of `certfsm export-c --check` cross-compiles
the exported C for a Cortex-M and reads the object's sections here, so it
needs no binutils. What lands where on a microcontroller (the usual linker
script): code (``.text*``) and constants (``.rodata*``) in flash;
initialised data (``.data*``) in flash, copied to RAM at start-up;
zero-initialised data (``.bss*``) in RAM only. Any other allocated section
(``.ARM.exidx``, the unwinding index) is flash when it has contents and
RAM when it is writable. Sections that are not allocated (symbols,
relocations, debug information) take no memory on the target.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

_SHF_WRITE, _SHF_ALLOC = 0x1, 0x2
_SHT_NOBITS = 8
_CLASSES = (".text", ".rodata", ".data", ".bss")


@dataclass(frozen=True)
class Section:
    """One section header: its name, type, flags and size in bytes."""

    name: str
    type: int
    flags: int
    size: int

    @property
    def is_allocated(self) -> bool:
        return bool(self.flags & _SHF_ALLOC)


@dataclass(frozen=True)
class MemorySizes:
    """Bytes of flash and RAM an object needs, by section class (see the module docstring)."""

    text: int
    rodata: int
    data: int
    bss: int
    other_flash: int
    other_ram: int

    @property
    def flash_bytes(self) -> int:
        return self.text + self.rodata + self.data + self.other_flash

    @property
    def ram_bytes(self) -> int:
        return self.data + self.bss + self.other_ram


def read_sections(path) -> tuple[Section, ...]:
    """The section headers of an ELF32 file; ValueError naming the file and what is wrong for anything else."""
    path = Path(path)
    blob = path.read_bytes()
    if blob[:4] != b"\x7fELF":
        raise ValueError(f"{path}: not an ELF file (it starts with {blob[:4]!r}, not b'\\x7fELF')")
    if blob[4] != 1:
        raise ValueError(f"{path}: ELF class {blob[4]} is not ELF32 (1); compile for a 32-bit target")
    if blob[5] not in (1, 2):
        raise ValueError(f"{path}: ELF data encoding {blob[5]} is neither little (1) nor big endian (2)")
    order = "<" if blob[5] == 1 else ">"
    try:
        (shoff,) = struct.unpack_from(order + "I", blob, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", blob, 0x2E)
        if shnum and shentsize < 40:
            raise ValueError(f"{path}: section header size {shentsize} is below the 40 bytes of ELF32")
        headers = [struct.unpack_from(order + "10I", blob, shoff + k * shentsize) for k in range(shnum)]
        if shnum and not shstrndx < shnum:
            raise ValueError(f"{path}: section name table index {shstrndx} is not below the {shnum} sections")
        names_at = headers[shstrndx][4] if shnum else 0
        sections = []
        for header in headers:
            start = names_at + header[0]
            end = blob.index(b"\0", start)
            sections.append(Section(blob[start:end].decode("ascii", "replace"), header[1], header[2], header[5]))
    except (struct.error, ValueError) as error:
        if str(error).startswith(str(path)):
            raise
        raise ValueError(f"{path}: truncated or malformed section headers ({error})") from None
    return tuple(sections)


def _class_of(name: str) -> str | None:
    return next((c for c in _CLASSES if name == c or name.startswith(c + ".")), None)


def memory_sizes(sections) -> MemorySizes:
    """Sum the allocated sections of an object into flash and RAM classes."""
    totals = dict.fromkeys((*(c[1:] for c in _CLASSES), "other_flash", "other_ram"), 0)
    for section in sections:
        if not section.is_allocated:
            continue
        kind = _class_of(section.name)
        if kind is not None:
            totals[kind[1:]] += section.size
            continue
        if section.type != _SHT_NOBITS:
            totals["other_flash"] += section.size
        if section.flags & _SHF_WRITE:
            totals["other_ram"] += section.size
    return MemorySizes(**totals)
