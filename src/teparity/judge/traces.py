"""Invariants over thunder traces (``teparity.trace_summary``), with violations that carry the trace tail as
evidence: every invariant is a function of a summary, so a check reads the same in one process and on
several ranks, on every thunder build."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from teparity.judge.failures import TraceInvariantBroken
from teparity.stack.symbols import BACKWARD_SYNC_SYMBOL
from teparity.trace_summary import SymbolRow, TraceSummary

TAIL_ROWS = 4
CONTEXT_ROWS = 2


@dataclasses.dataclass(frozen=True)
class Violation:
    invariant: str
    message: str
    evidence: str

    def render(self) -> str:
        return f"[{self.invariant}] {self.message}\n{self.evidence}"


def render_rows(summary: TraceSummary, focus: Iterable[int]) -> str:
    """The trace tail and the rows around ``focus``, with indices; focused rows are marked ``>>``."""
    focus = set(focus)
    shown: set[int] = set(range(max(0, len(summary.rows) - TAIL_ROWS), len(summary.rows)))
    for index in focus:
        shown.update(range(max(0, index - CONTEXT_ROWS), min(len(summary.rows), index + CONTEXT_ROWS + 1)))
    lines = [f"  {summary.label} ({len(summary.rows)} bound symbols):"]
    previous = -1
    for index in sorted(shown):
        if index != previous + 1:
            lines.append("      ...")
        row = summary.rows[index]
        marker = ">>" if index in focus else "  "
        lines.append(f"  {marker} {index:4d}  {row.text}")
        previous = index
    return "\n".join(lines)


def _violation(summary: TraceSummary, invariant: str, message: str, focus: Iterable[int]) -> Violation:
    return Violation(invariant=invariant, message=f"{summary.label}: {message}", evidence=render_rows(summary, focus))


# -- invariants of the legacy executor's backward FP8 sync -------------------------------------------


def check_backward_sync(summary: TraceSummary, *, expect_grad_waits: bool = False) -> list[Violation]:
    """Exactly one backward sync, immediately before the return and after every gradient wait.

    With ``expect_grad_waits`` (a DDP backward), the trace must also hold the gradient all-reduce
    waits: a DDP backward without them is not the trace this invariant is about.
    """
    syncs = summary.indices("backward_sync")
    returns = summary.indices("return")
    waits = summary.indices("grad_wait")
    if len(returns) != 1:
        return [_violation(summary, "single-return", f"expected one return symbol, found {len(returns)}", returns)]
    return_index = returns[0]
    if len(syncs) != 1:
        found = f"at indices {syncs}" if syncs else "none"
        return [
            _violation(
                summary,
                "backward-sync-count",
                f"expected exactly one {BACKWARD_SYNC_SYMBOL}, found {len(syncs)} ({found}); return at {return_index}",
                [*syncs, return_index],
            )
        ]
    sync_index = syncs[0]
    violations = []
    if sync_index > return_index:
        violations.append(
            _violation(
                summary,
                "backward-sync-before-return",
                f"{BACKWARD_SYNC_SYMBOL} at index {sync_index} comes after the return at index {return_index}: "
                "it never runs",
                [sync_index, return_index],
            )
        )
    elif sync_index != return_index - 1:
        violations.append(
            _violation(
                summary,
                "backward-sync-before-return",
                f"{BACKWARD_SYNC_SYMBOL} at index {sync_index} is not immediately before the return at index "
                f"{return_index} ({return_index - sync_index - 1} symbols between)",
                [sync_index, return_index],
            )
        )
    if expect_grad_waits and not waits:
        violations.append(
            _violation(summary, "backward-sync-after-grad-waits", "a DDP backward without gradient waits", [])
        )
    late_waits = [index for index in waits if index > sync_index]
    if late_waits:
        violations.append(
            _violation(
                summary,
                "backward-sync-after-grad-waits",
                f"{BACKWARD_SYNC_SYMBOL} at index {sync_index} precedes gradient all-reduce waits at {late_waits}",
                [sync_index, *late_waits],
            )
        )
    return violations


def check_no_forward_sync(summary: TraceSummary) -> list[Violation]:
    """The backward sync belongs to the backward trace only."""
    syncs = summary.indices("backward_sync")
    if not syncs:
        return []
    return [
        _violation(
            summary,
            "no-sync-in-forward",
            f"{BACKWARD_SYNC_SYMBOL} in the forward trace at indices {syncs}",
            syncs,
        )
    ]


def violations_message(violations: Sequence[Violation], context: str) -> str:
    """Every violation and its evidence in one message, the first one in its headline."""
    first = violations[0]
    body = "\n\n".join(v.render() for v in violations)
    return f"{len(violations)} trace invariant violation(s), first: [{first.invariant}] {first.message}\n{context}\n\n{body}"


def assert_no_violations(violations: Sequence[Violation], context: str, *, ranks: int | None = None) -> None:
    """Fail with every violation and its evidence in one message (a ``TraceInvariantBroken``, which a
    known-defect entry can match on; ``ranks``: how many ranks' traces were checked, where that is known)."""
    __tracebackhide__ = True
    if violations:
        raise TraceInvariantBroken(
            violations_message(violations, context),
            violations=[{"invariant": v.invariant, "message": v.message} for v in violations],
            ranks=ranks,
        )


# -- invariants that need TE: who ran the linears, the functional executor's updates ----------------


def _named(summary: TraceSummary, prefix: str) -> list[int]:
    return [row.index for row in summary.rows if row.name.startswith(prefix)]


def check_te_claims(forward: TraceSummary, backward: TraceSummary | None, executor: str, n_linears: int) -> list[Violation]:
    """TE symbols hold every linear, forward and backward (None: a forward-only program): a silent
    fallback to torch is a failure."""
    from teparity.stack.symbols import TE_BACKWARD_LINEAR_PREFIX, TE_FORWARD_LINEAR_PREFIX

    violations = []
    directions = [(forward, TE_FORWARD_LINEAR_PREFIX[executor])]
    if backward is not None:
        directions.append((backward, TE_BACKWARD_LINEAR_PREFIX[executor]))
    for summary, prefix in directions:
        claimed = _named(summary, prefix)
        if len(claimed) != n_linears:
            plain = [row.index for row in summary.rows if row.name in ("linear", "matmul") or row.name.startswith("nvFusion")]
            violations.append(
                _violation(
                    summary,
                    "te-claims-every-linear",
                    f"the {executor} TE executor holds {len(claimed)} of {n_linears} linears ({prefix}* at {claimed}): "
                    f"silent fallback; torch linear/matmul/fusion symbols instead at {plain}",
                    [*claimed, *plain],
                )
            )
    return violations


def check_cuda_graph_regions(forward: TraceSummary) -> list[Violation]:
    """Where thunder's CUDA graph transform was asked for, the forward runs in graphs: at least one region."""
    from teparity.stack.symbols import CUDA_GRAPH_REGION_PREFIX

    if _named(forward, CUDA_GRAPH_REGION_PREFIX):
        return []
    return [_violation(forward, "cuda-graph-regions", f"no {CUDA_GRAPH_REGION_PREFIX}* region: the CUDA graph "
                       "transform captured nothing", [])]


def te_linears_held(forward: TraceSummary, executor: str) -> int:
    """How many linears the executor's TE symbols hold in a forward trace."""
    from teparity.stack.symbols import TE_FORWARD_LINEAR_PREFIX

    return len(_named(forward, TE_FORWARD_LINEAR_PREFIX[executor]))


def check_no_forward_linear_in_backward(backward: TraceSummary, executor: str, recomputed: tuple[int, int] = (0, 0)) -> list[Violation]:
    """A forward TE linear in the backward trace is a recomputation: between ``recomputed[0]`` and
    ``recomputed[1]`` of them (the linears of an activation-checkpointed region), none otherwise."""
    from teparity.stack.symbols import TE_FORWARD_LINEAR_PREFIX

    found = _named(backward, TE_FORWARD_LINEAR_PREFIX[executor])
    least, most = recomputed
    if least <= len(found) <= most:
        return []
    expected = f"{least}" if least == most else f"{least} to {most}"
    return [_violation(backward, "recomputed-te-linears", f"{len(found)} forward TE linears recomputed (at {found}), "
                       f"expected {expected}", found)]


def check_functional_updates(summary: TraceSummary, n_linears: int | None, *, max_recipes: int) -> list[Violation]:
    """Exactly one amax/scale update per TE linear (``n_linears`` None: any number, where activation
    checkpointing moves updates between the traces and ``check_fp8_state_updates`` counts them per
    state), all before the return; at most ``max_recipes`` recipe lookups."""
    from teparity.stack.symbols import FUNCTIONAL_RECIPE_PREFIX, FUNCTIONAL_UPDATE_SYMBOL

    updates = _named(summary, FUNCTIONAL_UPDATE_SYMBOL)
    returns = summary.indices("return")
    recipes = _named(summary, FUNCTIONAL_RECIPE_PREFIX)
    violations = []
    if n_linears is not None and len(updates) != n_linears:
        violations.append(
            _violation(summary, "one-amax-update-per-linear", f"{len(updates)} {FUNCTIONAL_UPDATE_SYMBOL} for {n_linears} TE linears (at {updates})", updates)
        )
    late = [i for i in updates if returns and i > returns[0]]
    if late:
        violations.append(
            _violation(summary, "amax-updates-before-return", f"updates at {late} after the return at {returns[0]}: they never run", [*late, *returns])
        )
    if len(recipes) > max_recipes:
        violations.append(
            _violation(summary, "one-recipe-per-trace", f"{len(recipes)} recipe lookups (at {recipes}), expected at most {max_recipes}", recipes)
        )
    return violations


def check_fp8_state_updates(forward: TraceSummary, backward: TraceSummary | None, n_linears: int) -> list[Violation]:
    """The functional executor's FP8 states over one step (its forward and backward traces): one state
    per linear and direction, each updated by exactly one ``te_fp8_amax_and_scale_update``, and every
    forward TE linear in the backward (a recomputation under activation checkpointing) quantizing with
    the forward state of the forward linear of the same weight: what thunder's activation-checkpointing
    transform (``_te_activation_checkpointing_transform``) promises. Follows proxy names through
    ``get_te_fp8_state_N`` and ``get_te_fp8_quantizers_N``."""
    from teparity.stack.symbols import FUNCTIONAL_UPDATE_SYMBOL, TE_FORWARD_LINEAR_PREFIX

    summaries = [forward] if backward is None else [forward, backward]
    state_of: dict[str, str] = {}  # state proxy -> its get_te_fp8_state symbol
    created: dict[str, TraceSummary] = {}  # get_te_fp8_state symbol -> the trace that creates it
    quantizers_of: dict[str, str] = {}  # quantizer proxy -> the state proxy it was made from
    for summary in summaries:
        for row in summary.rows:
            if row.name.startswith("get_te_fp8_state"):
                created.setdefault(row.name, summary)
                state_of.update({out: row.name for out in row.outputs})
            elif row.name.startswith("get_te_fp8_quantizers") and row.inputs:
                quantizers_of.update({out: row.inputs[0] for out in row.outputs})
    violations = []
    expected_states = n_linears * len(summaries)
    if len(created) != expected_states:
        violations.append(_violation(
            forward, "one-fp8-state-per-linear",
            f"{len(created)} FP8 states ({sorted(created)}) for {n_linears} TE linears in {len(summaries)} direction(s)",
            [],
        ))
    updates: dict[str, list[str]] = {name: [] for name in created}
    for summary in summaries:
        for row in summary.rows:
            if row.name == FUNCTIONAL_UPDATE_SYMBOL:
                for state in {state_of[p] for p in row.inputs if p in state_of}:
                    updates.setdefault(state, []).append(f"{summary.label} #{row.index}")
    wrong = {state: where for state, where in updates.items() if len(where) != 1}
    if wrong:
        violations.append(_violation(
            backward or forward, "one-update-per-fp8-state",
            f"FP8 states not updated exactly once per step: {wrong}", [],
        ))

    def forward_state(row: SymbolRow) -> str | None:
        return state_of.get(quantizers_of.get(row.inputs[-2], "")) if len(row.inputs) >= 2 else None

    prefix = TE_FORWARD_LINEAR_PREFIX["functional"]
    state_by_weight = {row.inputs[1]: forward_state(row) for row in forward.rows if row.name.startswith(prefix) and len(row.inputs) > 1}
    for row in () if backward is None else backward.rows:
        if row.name.startswith(prefix):
            state, weight = forward_state(row), row.inputs[1] if len(row.inputs) > 1 else None
            if state is None or created.get(state) is not forward or state != state_by_weight.get(weight):
                violations.append(_violation(
                    backward, "recompute-reuses-forward-fp8-state",
                    f"the recomputed linear at {row.index} (weight {weight}) quantizes with FP8 state {state}; the "
                    f"forward linear of that weight uses {state_by_weight.get(weight)}", [row.index],
                ))
    return violations
