"""The README reads top-down: its contents list is its sections, and every link into docs/ lands on a heading.

Sections move as the project grows (benchmark tables live in
docs/benchmarks.md); a contents entry or a link that no longer leads
anywhere is the first thing a new user meets, so it fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "docs/benchmarks.md")


def anchor(title: str) -> str:
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def headings(text: str, level: str = "#+") -> list[str]:
    return re.findall(rf"(?m)^{level} (.+)$", text)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_contents_list_is_the_sections_in_order(document):
    text = (REPO / document).read_text()
    sections = [title for title in headings(text, "##") if title != "Contents"]
    block = text.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"(?m)^- \[(.+)\]\(#(.+)\)$", block)
    assert [title for title, _ in listed] == sections
    assert [target for _, target in listed] == [anchor(title) for title in sections]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_link_to_a_document_lands_on_a_heading(document):
    text = (REPO / document).read_text()
    base = (REPO / document).parent
    for target, fragment in re.findall(r"\]\(((?:\.\./|docs/)?[\w/.-]+\.md)(?:#([\w-]+))?\)", text):
        path = (base / target).resolve()
        assert path.is_file(), f"{document} links to {target}, which does not exist"
        if fragment:
            anchors = {anchor(title) for title in headings(path.read_text())}
            assert fragment in anchors, f"{document} links to {target}#{fragment}, which is no heading there"
