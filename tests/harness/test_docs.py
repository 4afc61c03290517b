"""The user's documents stay what a user can read: a README of at most 200 lines that opens with the two commands
CI runs, documents within their word budget, and no link that leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README_LINES = 200
DOCS_WORDS = 15_000


def test_the_readme_is_short_and_opens_with_the_two_commands_that_ci_runs() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, len(lines)
    ci = [line.split("&& ", 2)[-1] for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv")]
    first = "\n".join(lines[:20])
    assert len(ci) == 2 and all(command in first for command in ci), (ci, first)


def test_the_documents_stay_within_their_word_budget() -> None:
    words = {path.name: len(path.read_text().split()) for path in sorted((REPO / "docs").glob("*.md"))}
    assert sum(words.values()) < DOCS_WORDS, words


def test_every_relative_link_of_the_documents_leads_somewhere() -> None:
    dead = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"[a-z]+://", target) and not (page.parent / target).exists():
                dead.append(f"{page.relative_to(REPO)}: {target}")
    assert not dead, dead
