"""The project speaks of what it is, not of how it was made: no tracked text file narrates working periods (counted
by ordinal, "this session"), accounts for machine time or names a folder by the period that made it. Data files
(parity reports, logs) are what ran, as it ran, and are not read."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from harness import REPO

_ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|"
             "fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\\d+(?:st|nd|rd|th)")
#: The phrases the project's own history used.
NARRATION = re.compile(
    rf"\b(?:{_ORDINALS})[ -](?:development |working )?(?:session|sitting|working period)s?\b"
    r"|\b(?:this|that|last|next|previous|earlier) (?:session|sitting)\b|\bdevice[- ](?:time|call)s?\b",
    re.IGNORECASE,
)
#: A path component named by the period that made it: "h200-te2.9.0-tenth", "call2-db1ecfc".
PERIOD_IN_NAME = re.compile(rf"(?:^|[-_/])(?:{_ORDINALS})(?:$|[-_/.])|(?:^|/)call\d+[-_/]", re.IGNORECASE)
#: This file, whose examples are the phrases it catches.
SELF = "harness/test_narration.py"
DATA = (".json", ".log", ".jsonl", ".tgz", ".gz", ".xz", ".prof", ".png", ".whl")


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.splitlines()


def narration(text: str) -> list[str]:
    return [match.group(0) for match in NARRATION.finditer(text)]


def test_no_tracked_text_narrates_how_the_project_was_made() -> None:
    found = {}
    for path in _tracked():
        if path.endswith(DATA) or path == SELF or not (REPO / path).is_file():
            continue
        try:
            text = (REPO / path).read_text()
        except UnicodeDecodeError:
            continue
        if said := narration(text):
            found[path] = said[:3]
    assert not found, found


def test_no_tracked_file_or_folder_is_named_by_a_working_period() -> None:
    named = [path for path in _tracked() if PERIOD_IN_NAME.search(path)]
    assert not named, named[:20]


def test_the_patterns_catch_the_history_and_pass_the_product() -> None:
    for said in ("in the tenth session", "Results (fourteenth session, CPU)", "this session's code", "68 s of device time",
                 "an earlier device call", "the 2nd sitting"):
        assert narration(said), said
    for fine in ("pytest's session start", "the first call of a pool", "a session-scoped fixture", "first FP8 step",
                 "the second call compiles nothing"):
        assert not narration(fine), fine
    for name in ("docs/results/h200-te2.9.0-tenth/x.json", "docs/results/h200-x/call2-db1ecfc/r.json", "a/first-run.md"):
        assert PERIOD_IN_NAME.search(name), name
    assert not PERIOD_IN_NAME.search("docs/results/h200-te2.9.0-04f6fc3/th0.2.6.json")
