"""docs/results holds the evidence of today's claims, no more and no less: every path into it that a tracked file
names exists there, and every folder in it is named by a tracked file outside it (the registry, the guides, the
code, the tests). A run nothing cites any more leaves the tree; git history keeps it. Named: ``docs/results/X``
(the top README, the code), ``results/X`` (a guide's relative link), ``"results" / "X"`` (a path joined in Python)
and a markdown link that leads into the folder from where it is written (the index's ``(X/)``, a run's ``(../X/)``)."""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path
from harness import REPO
from teparity.reportfile import is_parity_report

RESULTS = REPO / "docs" / "results"
#: This file, whose patterns are no citations.
SELF = "harness/test_results_cited.py"
#: A run's own output under docs/results (parity reports, logs, printed summaries) is what ran, as it ran: the paths
#: in it are of its day, not citations. Its README, notes and scripts are read.
DATA = (".json", ".jsonl", ".log", ".txt", ".out", ".xml")
#: Paths a file names as examples, not as evidence: the folder names by working period that test_narration catches.
EXAMPLES = {
    "harness/test_narration.py": {"h200-te2.9.0-tenth/x.json", "h200-x/call2-db1ecfc/r.json",
                                        "h200-te2.9.0-04f6fc3/th0.2.6.json"},
}
#: ``docs/results/PATH`` or ``results/PATH`` (after any ``../``), not inside a longer path or word: PATH of
#: [A-Za-z0-9._/-], up to an anchor, a quote, a bracket or a space; one that goes on into a shell variable or a
#: pattern (``$``, ``{``, ``*``, ``<``) is a template, not a path.
NAMED = re.compile(r"(?:(?<![A-Za-z0-9._/-])|(?<=\.\./))(?:docs/)?results/([A-Za-z0-9._/-]*)(?![A-Za-z0-9._/$*{<%-])")
#: ``"results" / "X" / "Y"``: a path joined with pathlib's ``/``.
JOINED = re.compile(r"""["']results["']((?:\s*/\s*["'][A-Za-z0-9._-]+["'])+)""")
#: A markdown link's relative target, without its anchor; and in markdown a path that climbs (``../X/README.md``).
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CLIMBING = re.compile(r"(?<![A-Za-z0-9._/-])((?:\.\./)+[A-Za-z0-9._-][A-Za-z0-9._/-]*)(?![A-Za-z0-9._/$*{<%-])")


def _tracked_texts() -> dict[str, str]:
    """Every tracked file that is text (UTF-8, no NUL byte) and on disk, by its path from the repository root."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    names = listed.decode().split("\0")
    texts = {}
    for name in filter(None, names):
        path = REPO / name
        if name == SELF or (name.startswith("docs/results/") and name.endswith(DATA)) or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def citations() -> dict[str, list[str]]:
    """Each path under docs/results that a tracked file names (relative to docs/results, a sentence's full stop
    stripped; "" for the folder itself) -> where it is named, ``FILE:LINE`` each."""
    found: dict[str, list[str]] = defaultdict(list)
    for name, text in _tracked_texts().items():
        named: list[tuple[str, int]] = [(m.group(1), m.start()) for m in NAMED.finditer(text)]
        named += [("/".join(re.findall(r"""["']([A-Za-z0-9._-]+)["']""", m.group(1))), m.start())
                  for m in JOINED.finditer(text)]
        if name.endswith(".md"):
            for m in [*LINK.finditer(text), *CLIMBING.finditer(text)]:
                target = m.group(1).rstrip(".")
                if re.match(r"[a-z]+:", target):
                    continue
                resolved = ((REPO / name).parent / target).resolve()
                if resolved.is_relative_to(RESULTS):
                    inside = resolved.relative_to(RESULTS).as_posix()
                    named.append(("" if inside == "." else inside, m.start()))
        for path, offset in named:
            path = path.rstrip(".")
            if path in EXAMPLES.get(name, ()):
                continue
            where = f"{name}:{_line(text, offset)}"
            if where not in found[path]:
                found[path].append(where)
    return found


def _exists(path: str) -> bool:
    """A file or folder under docs/results, or the stem of a run's files (``unfused-fp8-update`` for its ``.log``)."""
    target = RESULTS / path
    if target.exists():
        return True
    return target.parent.is_dir() and any(p.name.startswith(f"{target.name}.") for p in target.parent.iterdir())


def _places(where: list[str]) -> str:
    return ", ".join(where[:4]) + (f" and {len(where) - 4} more" if len(where) > 4 else "")


def test_every_path_into_docs_results_that_a_tracked_file_names_exists() -> None:
    missing = {f"docs/results/{path}": where for path, where in citations().items() if not _exists(path)}
    assert not missing, "paths into docs/results that are not there (a run that left the tree is named without a path " \
        "into docs/results: \"the earlier run NAME, in git history\"):\n" + "\n".join(
            f"{path}: named at {_places(where)}" for path, where in sorted(missing.items()))


def test_every_folder_in_docs_results_is_cited_from_outside_it() -> None:
    by_folder: dict[str, list[str]] = defaultdict(list)
    for path, where in citations().items():
        if folder := path.split("/", 1)[0]:
            by_folder[folder] += where
    folders = sorted(p.name for p in RESULTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    assert folders, RESULTS
    orphans = {folder: by_folder[folder] for folder in folders
               if all(where.startswith("docs/results/") for where in by_folder[folder])}
    assert not orphans, "folders under docs/results that no tracked file outside it cites (cite the run where a claim " \
        "rests on it, or delete it: git history keeps it):\n" + "\n".join(
            f"docs/results/{folder}: " + (f"named only inside docs/results, at {_places(where)}" if where else "named nowhere")
            for folder, where in orphans.items())


def test_the_results_index_lists_every_folder() -> None:
    """docs/results/README.md is the index of the runs: a folder it does not list is found by no one who reads it."""
    index = (RESULTS / "README.md").read_text()
    unlisted = [p.name for p in sorted(RESULTS.iterdir()) if p.is_dir() and f"[{p.name}]({p.name}/)" not in index]
    assert not unlisted, f"folders docs/results/README.md does not list: {unlisted}"


def test_every_committed_parity_report_is_compressed() -> None:
    """A parity report is about fifteen times smaller gzip-compressed, and every command reads it so: the evidence stays
    small enough to clone."""
    raw = []
    for path in sorted(RESULTS.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        if is_parity_report(data):
            raw.append(str(path.relative_to(REPO)))
    assert not raw, "parity reports committed uncompressed (gzip -9n each, and name it .json.gz where cited):\n" + "\n".join(raw)
