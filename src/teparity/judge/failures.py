"""The failure modes the judges raise, each with the evidence that a known-defect entry can match on.

A judge that finds a difference raises one of these (all ``AssertionError``s, so pytest shows them as
ordinary failures) with its message and an ``evidence`` mapping of plain facts. The known-defect
registry (``teparity.gate.known_defects``) turns a failure into a registered expected failure only when its
type and its evidence match an entry; anything else stays a failure. Plain data: no torch import.
"""

from __future__ import annotations

from typing import Any


class GateFailure(AssertionError):
    """A check failed; ``evidence`` holds the facts a registry predicate may read."""

    def __init__(self, message: str, **evidence: Any) -> None:
        super().__init__(message)
        self.evidence = evidence


class SilentFallback(GateFailure):
    """A TE executor left linears to torch. Evidence: ``executor``, ``claimed`` (the most TE linears any
    run held) and ``linears`` (how many the model has)."""


class PartedFromEager(GateFailure):
    """thunder + TE differs from eager TE, or a case raised on one side. Evidence: ``case_errors``
    (``{"case": Case, "side": str, "error": str}`` each), ``numeric_differences`` (outputs, gradients,
    FP8 state beyond the rule), ``first_difference`` (``(step, micro)`` of the first numeric one, micro
    None for a parameter gradient or state, or None), ``cache_entries`` (per rank and case, thunder
    side), ``micro_batches``, ``forwards_recorded`` (``{"eager": n, "thunder": n}``: forward passes
    that the step-0 FP8 amax history holds, or None), ``forwards_by_step`` (the same per step, a list
    per side), ``first_amaxes`` (per side, linear and role: rank 0's first case's newest amax after
    step 0), ``first_pending_amaxes`` (the same for row 0 of the history, which the update zeroes),
    ``variant`` (``PairSpec.variant()``), ``ranks_parted`` (differences between the ranks' thunder FP8
    states, which the amax reduction keeps identical)."""


class TraceInvariantBroken(GateFailure):
    """A trace breaks an invariant that thunder's TE executors promise. Evidence: ``violations``, one
    ``{"invariant": name, "message": str}`` per broken invariant, in the order the checks found them, and
    ``ranks``: how many ranks' traces were checked (None where the check does not say)."""


class SyncCountWrong(GateFailure):
    """The legacy executor's backward FP8 sync ran other than once per backward. Evidence: ``counts``
    (``{rank: syncs per step}``, every rank) and ``expected`` (the per-step counts each rank should have)."""


class ReducedOutsideTheGroup(GateFailure):
    """Under fp8 groups smaller than the world, thunder's FP8 state differs from eager TE's. Evidence:
    ``thunder_equal_across_world`` (every rank's thunder FP8 state identical: reduced over the world)."""


class ThunderRunRaised(GateFailure):
    """thunder's side of a check raised where the check needs it to run (its traces, its FP8 state).
    Evidence: ``errors``, one ``{"rank": int, "error": str}`` per case that raised, the error as a side
    records it (its first line, then the traceback); ``teparity.judge.parity.raise_if_thunder_raised``."""


class RaisedOnTheRanks(GateFailure):
    """thunder raised on the ranks instead of running. Evidence: ``world_size`` and ``errors``, one per
    rank that raised: ``{"rank": int, "type": the exception's qualified type, "message": str,
    "functions": its traceback's function names, outermost first}``."""


def raise_if_ranks_raised(runs: list[Any], what: str, context: str) -> None:
    """Raise ``RaisedOnTheRanks`` with every rank's traceback where any run carries an ``error``
    (``records.RankError``): ``what`` raised on those ranks (e.g. "thunder's DDP transform")."""
    __tracebackhide__ = True
    raised = [(rank, run.error) for rank, run in enumerate(runs) if run.error is not None]
    if raised:
        blocks = "\n".join(f"--- rank {rank} raised ---\n{error.traceback.rstrip()}" for rank, error in raised)
        raise RaisedOnTheRanks(
            f"{what} raised on {len(raised)} of {len(runs)} ranks: {raised[0][1].type}: {raised[0][1].message}; "
            f"{context}\n{blocks}",
            world_size=len(runs),
            errors=[{"rank": rank, "type": e.type, "message": e.message, "functions": e.functions} for rank, e in raised],
        )
