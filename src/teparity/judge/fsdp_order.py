"""Where the FP8 amax reductions sit among FSDP's collectives in thunder's traces, and whether every rank
issues them in one order.

The functional executor's ``te_fp8_amax_and_scale_update`` all-reduces its states' amax histories over the
default group, synchronously, while thunder's FSDP issues its all-gathers and reduce-scatters
asynchronously over its own copy of that group (``copy_default_process_group``); the legacy executor's
``te_sync_fp8_meta_bwd`` all-reduces too. Ranks that issue these in different orders can deadlock (each
waits in a collective its peers have not reached), so the sequence of collectives, waits, amax updates
and syncs in each execution trace must be the same on every rank. ``trace_violations`` (judge.parity)
already holds the count: one update per TE linear and trace, i.e. one per state per step.
"""

from __future__ import annotations

from teparity.records import CaseRun
from teparity.stack.symbols import BACKWARD_SYNC_SYMBOL, FUNCTIONAL_UPDATE_SYMBOL
from teparity.trace_summary import TraceSummary, is_distributed


def _short(name: str) -> str:
    return name.removeprefix("torch_").removesuffix("_prim_impl")


def collective_sequence(summary: TraceSummary) -> list[str]:
    """The distributed symbols (thunder's torch-executor collectives and waits), amax updates and
    backward syncs of a trace, in order, by short name."""
    return [
        _short(row.name) for row in summary.rows
        if (is_distributed(row.name) and "bucket" not in row.name)
        or row.name.startswith(FUNCTIONAL_UPDATE_SYMBOL) or row.name == BACKWARD_SYNC_SYMBOL
    ]


def compressed(sequence: list[str]) -> str:
    """``all_gather x2 > wait x2 > te_fp8_amax_and_scale_update``: runs of one name counted."""
    parts: list[list[object]] = []
    for name in sequence:
        if parts and parts[-1][0] == name:
            parts[-1][1] += 1  # type: ignore[operator]
        else:
            parts.append([name, 1])
    return " > ".join(f"{name} x{n}" if n > 1 else str(name) for name, n in parts) or "none"


def order_differences(thunder_by_rank: list[list[CaseRun]]) -> list[str]:
    """Every rank's forward and backward sequence against rank 0's, per case: the first position where
    they part. Empty: one order on every rank."""
    differences = []
    for rank, runs in enumerate(thunder_by_rank[1:], start=1):
        for reference, run in zip(thunder_by_rank[0], runs, strict=True):
            for which in ("forward", "backward"):
                ours, theirs = getattr(reference, which), getattr(run, which)
                if ours is None or theirs is None:
                    continue
                a, b = collective_sequence(ours), collective_sequence(theirs)
                if a != b:
                    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                    differences.append(
                        f"case {run.case.label()} {which}: rank {rank} issues {compressed(b)} but rank 0 {compressed(a)} "
                        f"(first parting at position {at}): ranks that disagree on the order of collectives can deadlock"
                    )
    return differences


def in_flight_updates(summary: TraceSummary) -> int:
    """Amax updates issued while an asynchronous FSDP collective of the trace has not been waited for
    (evidence: these overlap two groups' collectives)."""
    pending, count = 0, 0
    for name in collective_sequence(summary):
        if name in ("all_gather", "reduce_scatter", "all_reduce"):
            pending += 1
        elif name == "wait":
            pending = max(0, pending - 1)
        elif name.startswith(FUNCTIONAL_UPDATE_SYMBOL) and pending:
            count += 1
    return count


def placement(thunder_by_rank: list[list[CaseRun]]) -> str:
    """Rank 0's first case: the sequences of its forward and backward traces, for the evidence."""
    run = thunder_by_rank[0][0]
    if run.forward is None or run.backward is None:
        return "no traces recorded"
    return (f"forward: {compressed(collective_sequence(run.forward))} ({in_flight_updates(run.forward)} updates with a "
            f"collective in flight); backward: {compressed(collective_sequence(run.backward))} "
            f"({in_flight_updates(run.backward)} with one in flight)")
