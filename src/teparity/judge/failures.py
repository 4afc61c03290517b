"""The failure modes the judges raise, each with the evidence that a known-defect entry can match on.

A judge that finds a difference raises one of these (all ``AssertionError``s, so pytest shows them as
ordinary failures) with its message and an ``evidence`` mapping of plain facts, under the keys each type declares
(its ``Evidence``). The known-defect
registry (``teparity.known``) turns a failure into a registered expected failure only when its
type and its evidence match an entry; anything else stays a failure. Plain data: no torch import.
"""

from __future__ import annotations

from typing import Any, TypedDict

from teparity.launch.outcome import block_header


class GateFailure(AssertionError):
    """A check failed; ``evidence`` holds the facts a registry predicate may read, under the keys its failure type
    declares (``Evidence``, a ``TypedDict``): a key it does not declare, or a required one left out, is a
    ``TypeError`` where the failure is raised, not a predicate that silently reads nothing."""

    Evidence: type = dict

    def __init__(self, message: str, **evidence: Any) -> None:
        super().__init__(message)
        required, known = self.Evidence.__required_keys__, self.Evidence.__annotations__.keys()  # type: ignore[attr-defined]
        if unknown := set(evidence) - known:
            raise TypeError(f"{type(self).__name__} has no evidence {sorted(unknown)} (it has {sorted(known)})")
        if missing := required - set(evidence):
            raise TypeError(f"{type(self).__name__} needs evidence {sorted(missing)}")
        self.evidence = evidence


class SilentFallbackEvidence(TypedDict):
    #: The TE executor that left linears to torch.
    executor: str | None
    #: The most linears any run held in TE symbols, and how many the network has.
    claimed: int
    linears: int


class SilentFallback(GateFailure):
    """A TE executor left linears to torch."""

    Evidence = SilentFallbackEvidence


class _PartedRequired(TypedDict):
    #: ``{"case": Case, "side": str, "error": str}`` per case that raised on a side.
    case_errors: list[dict[str, Any]]
    #: Outputs, gradients and FP8 state beyond the rule.
    numeric_differences: int
    #: ``(step, micro)`` of the first numeric difference (micro None for a parameter gradient or state), or None.
    first_difference: tuple[int, int | None] | None
    #: Thunder's compiled cache entries per rank and case.
    cache_entries: dict[int, dict[str, int | None]]
    micro_batches: int
    #: Forward passes that rank 0's step-0 amax history holds per side (``{"eager": n, "thunder": n}``), and the
    #: same per step (a list per side).
    forwards_recorded: dict[str, int | None]
    forwards_by_step: dict[str, list[int | None]]
    #: Per side, linear and role: rank 0's first case's newest amax after step 0.
    first_amaxes: dict[str, dict[str, dict[str, float]]]
    #: ``PairSpec.variant()``.
    variant: str


class PartedFromEagerEvidence(_PartedRequired, total=False):
    #: As ``first_amaxes`` for row 0 of the history, which the update zeroes.
    first_pending_amaxes: dict[str, dict[str, dict[str, float]]]
    #: Differences between the ranks' thunder FP8 states, which the amax reduction keeps identical.
    ranks_parted: int


class PartedFromEager(GateFailure):
    """thunder + TE differs from eager TE, or a case raised on one side."""

    Evidence = PartedFromEagerEvidence


class _TraceRequired(TypedDict):
    #: One ``{"invariant": name, "message": str}`` per broken invariant, in the order the checks found them.
    violations: list[dict[str, str]]


class TraceInvariantBrokenEvidence(_TraceRequired, total=False):
    #: How many ranks' traces were checked (None where the check does not say).
    ranks: int | None


class TraceInvariantBroken(GateFailure):
    """A trace breaks an invariant that thunder's TE executors promise."""

    Evidence = TraceInvariantBrokenEvidence


class SyncCountWrongEvidence(TypedDict):
    #: ``{rank: syncs per step}`` of every rank, and the per-step counts each rank should have.
    counts: dict[int, tuple[int, ...]]
    expected: tuple[int, ...]


class SyncCountWrong(GateFailure):
    """The legacy executor's backward FP8 sync ran other than once per backward."""

    Evidence = SyncCountWrongEvidence


class ReducedOutsideTheGroupEvidence(TypedDict):
    executor: str
    #: Every rank's thunder FP8 state identical: reduced over the world.
    thunder_equal_across_world: bool


class ReducedOutsideTheGroup(GateFailure):
    """Under fp8 groups smaller than the world, thunder's FP8 state differs from eager TE's."""

    Evidence = ReducedOutsideTheGroupEvidence


class ThunderRunRaisedEvidence(TypedDict):
    #: One ``{"rank": int, "error": str}`` per case that raised, the error as a side records it (its first line,
    #: then the traceback).
    errors: list[dict[str, Any]]


class ThunderRunRaised(GateFailure):
    """thunder's side of a check raised where the check needs it to run (its traces, its FP8 state);
    ``teparity.judge.parity.raise_if_thunder_raised``."""

    Evidence = ThunderRunRaisedEvidence


class RaisedOnTheRanksEvidence(TypedDict):
    world_size: int
    #: One per rank that raised: ``{"rank": int, "type": the exception's qualified type, "message": str,
    #: "functions": its traceback's function names, outermost first}``.
    errors: list[dict[str, Any]]


class RaisedOnTheRanks(GateFailure):
    """thunder raised on the ranks instead of running."""

    Evidence = RaisedOnTheRanksEvidence


def raise_if_ranks_raised(runs: list[Any], what: str, context: str) -> None:
    """Raise ``RaisedOnTheRanks`` with every rank's traceback where any run carries an ``error``
    (``records.RankError``): ``what`` raised on those ranks (e.g. "thunder's DDP transform")."""
    __tracebackhide__ = True
    raised = [(rank, run.error) for rank, run in enumerate(runs) if run.error is not None]
    if raised:
        blocks = "\n".join(f"{block_header(rank, 'raised')}\n{error.traceback.rstrip()}" for rank, error in raised)
        raise RaisedOnTheRanks(
            f"{what} raised on {len(raised)} of {len(runs)} ranks: {raised[0][1].type}: {raised[0][1].message}; "
            f"{context}\n{blocks}",
            world_size=len(runs),
            errors=[{"rank": rank, "type": e.type, "message": e.message, "functions": e.functions} for rank, e in raised],
        )
