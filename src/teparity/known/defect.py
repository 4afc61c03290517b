"""Known upstream defects: one registry, matched narrowly, so the gate is green on a stack's known state
and red on anything new.

Each entry names the checks and executors it covers, the thunder and TE versions where it holds, its
failure signature (a failure type from ``teparity.judge.failures`` plus a predicate over that failure's
evidence), the upstream cause and the committed run that showed it. The plugin marks every test the
entry covers on the installed stack as a strict xfail whose ``raises`` is the entry's own exception
type, and converts a failure to that type only when the signature matches (``match``). So:

- the defect itself: xfail (``known`` in the parity report, with the entry id);
- any other failure of the same test: fails for real;
- a build that fixes it: XPASS, which fails strict and names the entry to retire;
- outside every version range: no mark, the test runs strict; a failure there that matches an entry's
  signature anyway (a near miss) still fails, labelled with the entry and the range that excludes this
  stack, and the bisect command that would settle where the range really starts;
- ``pytest --runxfail``: the whole truth, each matched failure labelled with its entry.

A range ends where a run showed the defect gone (an upper bound cites its bisect, ``bounds``, or its run, ``fixed``)
and nowhere else: a newer thunder, TE or torch than every run stays in the range (extrapolated, and said so).

Ranges are PEP 440 specifiers (a defect that went away and came back: its spans joined by `` || ``), so a bound
named by release leaves out that release's own dev builds:
``>=0.2.6`` does not hold 0.2.6.dev20251019, which is a build before 0.2.6. Name a bound by build
(``>=0.2.6.dev20250324``) where a bisect found it, and cite that bisect's log in ``bounds``
(``python -m teparity bisect`` writes it; a harness test checks that the log's boundary is the bound).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

from packaging.specifiers import SpecifierSet

from teparity import checks
from teparity.stack.environment import Environment
from teparity.stack.versions import Versions, parse_version

Predicate = Callable[[Any, Environment], bool]


class KnownDefectSeen(AssertionError):
    """A failure that matched a registry entry (each entry has its own subclass: ``entry.seen_type``)."""

    entry_id = ""


class NearMiss(AssertionError):
    """A strict failure that matches an entry's signature outside its version ranges: it fails all the
    same (nothing says the defect holds here), and says which entry and which range."""


@dataclasses.dataclass(frozen=True)
class BisectedBound:
    """One clause of an entry's range, named by build, and the bisect log that found that build."""

    package: Literal["thunder", "te"]
    #: A clause of the entry's ``thunder`` or ``te`` range, e.g. ">=0.2.6.dev20250324".
    bound: str
    #: The bisect.json under docs/results/ whose boundary is that build.
    log: str


@dataclasses.dataclass(frozen=True)
class FixSeen:
    """An upper clause of an entry's range and the committed evidence that the defect is gone from the build it names
    on: a parity report of a run there (no test of the entry fails or is known as it), or a file of another run that
    showed it (a bisect's verdicts, a script's log). A range ends there and nowhere else: without one the range is
    open, and a newer build holds the entry by extrapolation."""

    package: Literal["thunder", "te", "torch"]
    #: A clause of the entry's range, e.g. "<0.2.5.dev20250831" or "<=0.2.6.dev20250928".
    bound: str
    #: The file under docs/results/ that shows it gone.
    evidence: str


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a defect's failure looks like: the failure type(s) the judging code raises for it (``RanksFailed``:
    a rank raised outside a judge) and a predicate over that failure's evidence, with the predicate in words
    (shown in the xfail reason and the docs)."""

    failure: type[AssertionError] | tuple[type[AssertionError], ...]
    matches: Predicate
    words: str
    #: The predicate also requires that nothing else differs and nothing else raised, on every rank: where no model
    #: can stand in for the defect (a side raises), this keeps a second regression from reading as known.
    bounded: bool = False

    def failure_names(self) -> str:
        kinds = self.failure if isinstance(self.failure, tuple) else (self.failure,)
        return " or ".join(kind.__name__ for kind in kinds)

    def matched_by(self, error: BaseException, env: Environment) -> bool:
        return isinstance(error, self.failure) and self.matches(error.evidence, env)  # type: ignore[attr-defined]


@dataclasses.dataclass(frozen=True)
class DefectModel:
    """The reference that does what thunder does wrong: eager TE changed by ``spec_change`` (``PairSpec`` fields; its
    ``model`` names an eager model of ``teparity.inrank.defect_models``). A test the entry covers runs thunder against
    it under the full rules, and must pass there (``teparity.gate.pairs.Pairs.judge_against_te_or_model``)."""

    words: str
    spec_change: tuple[tuple[str, Any], ...]
    #: Whether TE holds the linears in the model; False: torch runs every linear, TE must hold none.
    te_claims: bool = True
    #: Trace invariants the model waives (the defect is that thunder breaks them; the numbers must still match).
    waived: tuple[str, ...] = ()

    def applied(self, spec: Any) -> Any:
        """The eager side's ``PairSpec`` of the model."""
        return dataclasses.replace(spec, **dict(self.spec_change))


def combined(models: list[DefectModel]) -> DefectModel:
    """The model of several defects that cover one test at once: a model where torch runs every linear stands alone (no
    FP8 state is left for another to change); otherwise every model's change to the eager side, together."""
    if alone := next((model for model in models if not model.te_claims), None):
        return alone
    changes: dict[str, Any] = {}
    for model in models:
        for field, value in model.spec_change:
            if changes.setdefault(field, value) != value:
                raise ValueError(f"defect models disagree on {field}: {changes[field]!r} and {value!r}")
    return DefectModel(" and ".join(model.words for model in models), tuple(changes.items()),
                       waived=tuple(dict.fromkeys(w for model in models for w in model.waived)))


@dataclasses.dataclass(frozen=True)
class KnownDefect:
    id: str
    summary: str
    #: TE executors; None for a check that has none (it runs thunder without TE).
    executors: tuple[str | None, ...]
    #: Check names without their parameter part ("numerics" covers "numerics[delayed]" and the rest), or
    #: with it, for one parametrization alone ("fsdp-transform-matches-torch-fsdp[zero2-layer]").
    checks: tuple[str, ...]
    thunder: str
    te: str
    signature: Signature
    cause: str
    #: Committed runs under docs/results/ that showed it.
    seen: tuple[str, ...]
    #: The bounds that a bisect placed, each with its log.
    bounds: tuple[BisectedBound, ...] = ()
    #: The upper bounds that no bisect placed, each with the run that showed the defect gone there (``FixSeen``).
    fixed: tuple[FixSeen, ...] = ()
    #: A thunder defect that needs no TE: it holds where TE is absent too (``te`` still bounds it where
    #: TE is installed).
    without_te: bool = False
    #: The torch versions where it holds, for a thunder/torch pairing: a thunder build older than the torch it
    #: runs with (None: any torch).
    torch: str | None = None
    #: The eager model of a behaviour (None where the side raises: the signature is then ``bounded``).
    model: DefectModel | None = None

    def holds_for(self, check: str, executor: str | None, versions: Versions) -> bool:
        """Whether a test of ``check`` and ``executor`` on these versions is covered by this entry."""
        return self.names(check, executor) and self.holds_for_versions(versions)

    def names(self, check: str, executor: str | None) -> bool:
        """Whether this entry is about ``check`` and ``executor``, on any versions."""
        return executor in self.executors and any(checks.matches(pattern, check) for pattern in self.checks)

    def holds_for_versions(self, versions: Versions) -> bool:
        return (within(versions.thunder, self.thunder) and self._holds_for_te(versions.transformer_engine)
                and self._holds_for_torch(versions.torch))

    def holds_here(self) -> bool:
        """Whether it holds for the installed versions (what a harness test that meets it asks)."""
        return self.holds_for_versions(Versions.installed())

    def _holds_for_torch(self, torch: str | None) -> bool:
        return self.torch is None or within(torch, self.torch)

    def _holds_for_te(self, te: str | None) -> bool:
        return within(te, self.te) or (self.without_te and te is None)

    def te_range(self) -> str:
        """The TE versions in words: the range, and whether it holds without TE."""
        return f"`{self.te}`" + (", or none installed" if self.without_te else "")

    def excluded(self, versions: Versions) -> list[str]:
        """Which of this entry's ranges leave these versions out, in words (empty when both hold)."""
        said = []
        if not within(thunder := versions.thunder, self.thunder):
            said.append(f"thunder {thunder or 'absent'} not in `{self.thunder}`{_before_release(thunder, self.thunder)}")
        if not self._holds_for_te(te := versions.transformer_engine):
            said.append(f"TE {te or 'absent'} not in {self.te_range()}{_before_release(te, self.te)}")
        if not self._holds_for_torch(torch := versions.torch):
            said.append(f"torch {torch or 'absent'} not in `{self.torch}`")
        return said

    def reason(self) -> str:
        return (
            f"known upstream defect {self.id}: {self.summary} [signature: {self.signature.failure_names()} where "
            f"{self.signature.words}; cause: {self.cause}; seen: {', '.join(self.seen)}] "
            f"(an XPASS means it is fixed: retire '{self.id}', its module in teparity/known/defects/)"
        )

    @property
    def seen_type(self) -> type[KnownDefectSeen]:
        """This entry's own exception type (what its strict xfail expects), one per entry and process."""
        if self.id not in _SEEN_TYPES:
            name = f"KnownDefect_{self.id.replace('-', '_').replace('.', '_')}"
            _SEEN_TYPES[self.id] = type(name, (KnownDefectSeen,), {"entry_id": self.id})
        return _SEEN_TYPES[self.id]


_SEEN_TYPES: dict[str, type[KnownDefectSeen]] = {}


def modeling(entries: list[KnownDefect]) -> KnownDefect | None:
    """The entry whose model a test is judged against, of those that cover it: the one with a model, or, where several
    have one, an entry that names them all and models them together (``combined``)."""
    with_models = [entry for entry in entries if entry.model is not None]
    if len(with_models) < 2:
        return with_models[0] if with_models else None
    model = combined([entry.model for entry in with_models])
    if alone := next((entry for entry in with_models if entry.model is model), None):
        return alone  # one model stands for all (torch runs every linear)
    return dataclasses.replace(with_models[0], id=_JOINED.join(entry.id for entry in with_models), model=model)


#: How the id of an entry that models several together joins theirs.
_JOINED = " + "


def modeled_ids(entry: KnownDefect) -> list[str]:
    """The registry entries whose defects ``modeling``'s entry models."""
    return entry.id.split(_JOINED)


#: What joins the spans of a range that holds over builds apart (a defect that went away and came back).
ANY_OF = " || "


def spans(specifier: str) -> list[str]:
    """The PEP 440 specifiers whose union a range is (one, unless it joins spans apart with ``ANY_OF``)."""
    return specifier.split(ANY_OF)


def within(version: str | None, specifier: str) -> bool:
    parsed = parse_version(version or "")
    return parsed is not None and any(SpecifierSet(span, prereleases=True).contains(parsed) for span in spans(specifier))


def _before_release(version: str | None, specifier: str) -> str:
    """A note where ``version`` is a dev or pre-release build of a release the range holds."""
    parsed = parse_version(version or "")
    if parsed is None or not parsed.is_prerelease or not within(parsed.base_version, specifier):
        return ""
    return f" (a build before {parsed.base_version}, which PEP 440 orders below it: name the bound by build once a bisect finds it)"


