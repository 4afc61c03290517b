"""The user's documents stay what a user can read, and say what the code does: a README of at most 200 lines that
opens with the two commands CI runs, guides within their word budget, no link that leads nowhere; tox.ini's
pointers and tier list, the environments, commands, options and entry fields the guides name, and the documents
they regenerate, checked against the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from harness import REPO

README_LINES = 200
#: The guides' budget; the documents generated from the registry and the matrix (their size follows the entries and
#: the stacks, and harness tests keep them current) are not in it.
GUIDE_WORDS = 9_500
GENERATED = ("compatibility.md", "known-defects.md")


def test_the_readme_is_short_and_opens_with_the_commands_that_ci_runs() -> None:
    """The gate, the harness, and the gate on the second torch: CI runs each verbatim."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, len(lines)
    ci = [line.split("&& ", 2)[-1] for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv")]
    first = "\n".join(lines[:20])
    assert len(ci) == 3 and all(command in first for command in ci), (ci, first)


def test_the_guides_stay_within_their_word_budget() -> None:
    words = {path.name: len(path.read_text().split()) for path in sorted((REPO / "docs").glob("*.md")) if path.name not in GENERATED}
    assert sum(words.values()) < GUIDE_WORDS, words


def test_every_relative_link_of_the_documents_leads_somewhere() -> None:
    dead = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"[a-z]+://", target) and not (page.parent / target).exists():
                dead.append(f"{page.relative_to(REPO)}: {target}")
    assert not dead, dead


def _headings(path: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")}


def _tox_comments() -> str:
    """tox.ini's comments as one text (a reference may continue on the next comment line)."""
    return " ".join(line.lstrip("#").strip() for line in (REPO / "tox.ini").read_text().splitlines() if line.startswith("#"))


def test_tox_comments_point_at_files_and_sections_that_exist() -> None:
    said = _tox_comments()
    files = set(re.findall(r"\b((?:docs/[\w.-]+|README)\.md|scripts/[\w.-]+)\b", said))
    assert files and not [name for name in files if not (REPO / name).exists()], files
    sections = re.findall(r"\b(README|(?:docs/)?[\w.-]+\.md), \"([^\"]+)\"", said)
    assert sections, said
    for name, section in sections:
        path = REPO / (name if name.endswith(".md") else f"{name}.md")
        assert section in _headings(path), f"tox.ini names {name}, {section!r}: not a heading there"


def test_tox_names_the_tiers_its_gpu_command_runs() -> None:
    named = re.search(r"\(tiers: ((?:tests/\w+ ?)+)", _tox_comments()).group(1).split()
    command = re.search(r"^\[gpu\]$.*?^commands =\n(.*?)\n\n", (REPO / "tox.ini").read_text(), re.M | re.S).group(1)
    assert named == re.findall(r"tests/\w+", command), (named, command)


def test_the_tox_environments_the_guides_name_exist() -> None:
    """A guide's or tox.ini's own ``tox -e NAME`` names an environment tox.ini has (``testenv`` is ``cpu``'s)."""
    text = (REPO / "tox.ini").read_text()
    made = set(re.findall(r"^\[testenv:(.*)\]$", text, re.M)) | {"cpu"}
    named = {name for page in [REPO / "README.md", REPO / "tox.ini", *(REPO / "docs").glob("*.md")]
             for name in re.findall(r"\btox -e ([\w.-]+)", page.read_text())}
    assert named and named <= made, named - made


def test_the_registry_guide_lists_every_field_of_an_entry() -> None:
    import dataclasses

    from teparity.known.defect import KnownDefect

    text = (REPO / "docs" / "registry.md").read_text()
    table = text[text.index("| field | what |"):].split("\n\n", 1)[0].splitlines()[2:]
    listed = [name for row in table for name in re.findall(r"`(\w+)`", row.split("|")[1])]
    assert sorted(listed) == sorted(field.name for field in dataclasses.fields(KnownDefect)), listed


def test_every_teparity_command_the_documents_name_exists_and_what_one_regenerates_is_current(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``python -m teparity CMD`` in the README and the guides names a command; where a guide says a command's output
    is a file (``python -m teparity CMD > FILE``, no arguments to fill in), running it gives that file."""
    from teparity.__main__ import main
    from teparity.cli.parser import parser

    commands = set(parser()[0]._subparsers._group_actions[0].choices)
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    named = {(page.name, word) for page in pages for word in re.findall(r"python -m teparity ([a-z-]+)", page.read_text())}
    assert named and not [n for n in named if n[1] not in commands], sorted(n for n in named if n[1] not in commands)
    regenerated = {(command, target) for page in pages
                   for command, target in re.findall(r"`python -m teparity ([a-z-]+) > ([\w./-]+)`", page.read_text())}
    assert ("known-defects", "docs/known-defects.md") in regenerated, regenerated
    for command, target in sorted(regenerated):
        assert main([command]) == 0
        assert capsys.readouterr().out == (REPO / target).read_text(), f"regenerate: python -m teparity {command} > {target}"


def test_the_readme_options_table_has_every_option_of_the_gate() -> None:
    helped = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout
    options = set(re.findall(r"^\s+(--teparity-[\w-]+)", helped, re.M))
    readme = (REPO / "README.md").read_text()
    assert options and not [option for option in options if f"| `{option}" not in readme], options
