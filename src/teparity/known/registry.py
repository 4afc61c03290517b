"""The registry over its entries: which entries cover a test on the installed stack, which entry a failure
matches (its signature), which it matches outside the entry's ranges (a near miss), and the registry as a
document."""

from __future__ import annotations

import importlib
import pkgutil

from teparity import checks
from teparity.known import defects
from teparity.known.defect import KnownDefect, within
from teparity.known.seen import newest_seen
from teparity.stack.environment import Environment
from teparity.stack.versions import Versions


def _discovered() -> tuple[KnownDefect, ...]:
    """Every module of ``teparity.known.defects`` is one defect, its ``ENTRY``: in force once the module exists (no
    list to add it to), in the order of their ids (the order the docs list them and the lookups try them)."""
    found = [importlib.import_module(f"{defects.__name__}.{module.name}").ENTRY for module in pkgutil.iter_modules(defects.__path__)]
    return tuple(sorted(found, key=lambda entry: entry.id))


REGISTRY = _discovered()
BY_ID = {entry.id: entry for entry in REGISTRY}


def registered_for(versions: Versions) -> list[str]:
    """The ids of the entries whose ranges hold these versions (the report header names them)."""
    return [entry.id for entry in REGISTRY if entry.holds_for_versions(versions)]


def extrapolated(versions: Versions) -> list[str]:
    """The entries that hold here only by extrapolation: the installed thunder or TE is newer than every committed
    run that showed the entry (``teparity.known.seen``), each with the version beyond it."""
    from packaging.version import Version

    said = []
    for entry in REGISTRY:
        if not entry.holds_for_versions(versions):
            continue
        thunder_seen, te_seen = newest_seen().get(entry.id, (None, None))
        beyond = [
            f"{name} {installed} > {seen or 'none seen'}"
            for name, installed, seen in (("thunder", versions.thunder, thunder_seen), ("TE", versions.transformer_engine, te_seen))
            if installed is not None and (seen is None or Version(installed) > Version(seen))
        ]
        if beyond:
            said.append(f"{entry.id} ({', '.join(beyond)})")
    return said


def extrapolation_line(said: list[str], base_held: set[str] = frozenset()) -> str | None:
    """``extrapolated``'s entries in one line, said once: how many, and by how much this stack is newer (each "thunder X" once,
    with every newest version seen below it); entries the base held too are left out (a PR dated after the newest run changes nothing of
    them). None where nothing is left to say."""
    left = [item for item in said if item.split(" ", 1)[0] not in base_held]
    if not left:
        return None
    newest: dict[str, dict[str, None]] = {}  # "thunder X" -> the newest versions seen, each once
    for item in left:
        for part in item.split(" (", 1)[1].removesuffix(")").split(", "):
            installed, seen = part.split(" > ", 1)
            newest.setdefault(installed, {})[seen] = None
    beyond = "; ".join(f"{installed} > {', '.join(seen)}" for installed, seen in newest.items())
    return (f"teparity: {len(left)} known upstream defect(s) held by extrapolation ({beyond}: newer than every run "
            "that showed them; the report's known_defects_extrapolated names them)")


def covering(check: str, executor: str | None, versions: Versions) -> list[KnownDefect]:
    """The entries that cover this check and executor on these versions."""
    return [entry for entry in REGISTRY if entry.holds_for(check, executor, versions)]


def match(entries: list[KnownDefect], error: BaseException, env: Environment) -> KnownDefect | None:
    """The entry whose signature ``error`` matches (its failure type and its evidence predicate), or None."""
    return next((entry for entry in entries if entry.signature.matched_by(error, env)), None)


def near_misses(check: str, executor: str | None, versions: Versions, error: BaseException, env: Environment) -> list[KnownDefect]:
    """The entries of this check and executor whose signature ``error`` matches although their version
    ranges leave this stack out."""
    near = [e for e in REGISTRY if e.names(check, executor) and not e.holds_for_versions(versions)]
    return [e for e in near if match([e], error, env) is e]


def near_miss_message(entry: KnownDefect, versions: Versions, nodeid: str) -> str:
    """What a near miss says: the entry, the range that excludes this stack, the bisect that settles it."""
    thunder_out = not within(versions.thunder, entry.thunder)
    package, version = ("lightning-thunder", versions.thunder) if thunder_out else ("transformer-engine", versions.transformer_engine)
    wheels = "" if thunder_out else " --wheels DIR"
    return (
        f"[near miss of known upstream defect {entry.id}: this failure matches its signature, but "
        f"{'; '.join(entry.excluded(versions))}, so it fails strict. If it is the same defect, bisect where it "
        f"starts: python -m teparity bisect --entry {entry.id} --package {package}{wheels} --good GOOD_BUILD --bad {version} -- "
        f"'{nodeid}' -p no:xdist; then name the bound by that build in {entry.id}'s range]"
    )


def _checks_in_words(covered: tuple[str, ...]) -> str:
    """The checks an entry covers; every check that runs TE (a whole executor lost) in words, not twenty names."""
    rest = [c for c in covered if c not in checks.TE_RUNS]
    if set(checks.TE_RUNS) <= set(covered):
        return "every check that runs a TE linear" + "".join(f", `{c}`" for c in rest)
    return ", ".join(f"`{c}`" for c in covered)


def _held_by(entry: KnownDefect) -> str:
    """What holds a covered test beyond the signature, in words."""
    if entry.model is not None:
        return f"a model, {entry.model.words}: thunder must match it under the full rules"
    if entry.signature.bounded:
        return "a bounded signature: nothing else may differ or raise, on any rank"
    return "its signature only"


def markdown() -> str:
    """The registry as a document (docs/known-defects.md is this, generated)."""
    lines = [
        "# Known upstream defects",
        "",
        "Generated by `python -m teparity known-defects` from `src/teparity/known/defects/`. A test that an",
        "entry covers (its checks and executors, on thunder and TE versions inside both ranges) is a strict",
        "xfail that expects only the entry's signature: the failure type that the judging code raises, and a",
        "predicate over that failure's evidence. Any other failure of that test fails; a pass (XPASS) fails",
        "too and names the entry to retire; outside the ranges the test runs strict. `pytest --runxfail`",
        "runs every covered test as a plain one. Where the defect is a behaviour, the entry has a model: eager",
        "TE built to do what thunder does wrong; a covered test is known only if thunder fails against eager",
        "TE with the signature and matches the model under the full rules (any other difference fails).",
    ]
    for entry in REGISTRY:
        lines += [
            "",
            f"## `{entry.id}`",
            "",
            entry.summary[0].upper() + entry.summary[1:] + ".",
            "",
            f"- checks: {_checks_in_words(entry.checks)}; executors: "
            f"{', '.join(e or 'none (the check runs no TE executor)' for e in entry.executors)}",
            f"- thunder `{entry.thunder}`, TransformerEngine {entry.te_range()}"
            + (f", torch `{entry.torch}` (a thunder/torch pairing)" if entry.torch else ""),
            f"- signature: `{entry.signature.failure_names()}` where {entry.signature.words}",
            f"- held by: {_held_by(entry)}",
            f"- cause: {entry.cause}",
            f"- seen: {', '.join(f'`{path}`' for path in entry.seen)}",
            *([f"- bounds bisected: {', '.join(f'{b.package} `{b.bound}` (`{b.log}`)' for b in entry.bounds)}"] if entry.bounds else []),
        ]
    return "\n".join(lines) + "\n"
