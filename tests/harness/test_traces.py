"""The trace invariants fire on real thunder backward traces with the sync moved, removed or duplicated."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teparity.judge.traces import (
    SymbolRow,
    TraceSummary,
    assert_no_violations,
    check_backward_sync,
    check_no_forward_sync,
    summarize,
)
from teparity.stack.envprobe import environment


@pytest.fixture(scope="module")
def real_traces() -> tuple[Any, Any]:
    """Forward and backward execution traces of a two-linear MLP under the legacy TE executor (CPU)."""
    if reason := environment().backward_sync_reason():
        pytest.skip(reason)
    import thunder

    from teparity.inrank.models import plain_mlp
    from teparity.inrank.syncspy import record_fp8_syncs
    from teparity.stack.versions import executor_module, find_te_executors, jit_options

    info = find_te_executors()["legacy"]
    jitted = thunder.jit(plain_mlp(), **jit_options(info))
    import torch

    with record_fp8_syncs(executor_module(info)):
        jitted(torch.randn(16, 32, requires_grad=True)).sum().backward()
    return thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]


def _with_bound_symbols(trace: Any, bound_symbols: list[Any]) -> Any:
    from thunder.core.trace import from_trace

    copy = from_trace(trace)
    copy.bound_symbols = bound_symbols
    return copy


def _split(trace: Any) -> tuple[list[Any], Any]:
    """The backward trace's symbols without the sync, and the sync itself."""
    symbols = list(trace.bound_symbols)
    (sync,) = [b for b in symbols if b.sym.name == "te_sync_fp8_meta_bwd"]
    symbols.remove(sync)
    return symbols, sync


def _invariants(violations: list[Any]) -> list[str]:
    return [v.invariant for v in violations]


def test_the_real_trace_satisfies_the_invariants(real_traces: tuple[Any, Any]) -> None:
    forward, backward = real_traces
    assert check_backward_sync(summarize(backward, "bwd")) == []
    assert check_no_forward_sync(summarize(forward, "fwd")) == []


def test_sync_after_the_return_is_reported_with_both_indices(real_traces: tuple[Any, Any]) -> None:
    symbols, sync = _split(real_traces[1])
    mutated = summarize(_with_bound_symbols(real_traces[1], [*symbols, sync]), "bwd")
    violations = check_backward_sync(mutated)
    assert _invariants(violations) == ["backward-sync-before-return"]
    ret, sync_index = len(symbols) - 1, len(symbols)
    assert f"at index {sync_index} comes after the return at index {ret}" in violations[0].message
    assert f">> {sync_index:4d}  te_sync_fp8_meta_bwd()" in violations[0].evidence
    with pytest.raises(AssertionError, match="it never runs"):
        assert_no_violations(violations, "context")


def test_a_missing_sync_is_reported(real_traces: tuple[Any, Any]) -> None:
    symbols, _ = _split(real_traces[1])
    violations = check_backward_sync(summarize(_with_bound_symbols(real_traces[1], symbols), "bwd"))
    assert _invariants(violations) == ["backward-sync-count"]
    assert "found 0 (none)" in violations[0].message


def test_a_duplicated_sync_is_reported(real_traces: tuple[Any, Any]) -> None:
    symbols, sync = _split(real_traces[1])
    doubled = [*symbols[:-1], sync, sync, symbols[-1]]
    violations = check_backward_sync(summarize(_with_bound_symbols(real_traces[1], doubled), "bwd"))
    assert _invariants(violations) == ["backward-sync-count"]
    assert f"found 2 (at indices {[len(symbols) - 1, len(symbols)]})" in violations[0].message


def test_a_sync_in_the_forward_is_reported(real_traces: tuple[Any, Any]) -> None:
    forward, backward = real_traces
    _, sync = _split(backward)
    symbols = list(forward.bound_symbols)
    violations = check_no_forward_sync(summarize(_with_bound_symbols(forward, [sync, *symbols]), "fwd"))
    assert _invariants(violations) == ["no-sync-in-forward"]


@given(position=st.data())
def test_the_sync_anywhere_but_right_before_the_return_is_a_violation(real_traces: tuple[Any, Any], position: Any) -> None:
    symbols, sync = _split(real_traces[1])
    index = position.draw(st.integers(0, len(symbols)), label="sync position")
    placed = summarize(_with_bound_symbols(real_traces[1], [*symbols[:index], sync, *symbols[index:]]), "bwd")
    violations = check_backward_sync(placed)
    correct = index == len(symbols) - 1
    assert (violations == []) == correct, (index, [v.render() for v in violations])


# -- DDP: the sync after every gradient wait (a summary shaped like a real DDP backward's tail) ------


def _ddp_tail(order: list[str]) -> TraceSummary:
    roles = {"w": ("torch_wait_prim_impl", "grad_wait"), "s": ("te_sync_fp8_meta_bwd", "backward_sync"),
             "r": ("python_return", "return"), "a": ("torch_all_reduce_prim_impl", "all_reduce"), "o": ("mul", "other")}
    return TraceSummary("ddp bwd", tuple(SymbolRow(i, roles[c][0], roles[c][1], roles[c][0]) for i, c in enumerate(order)))


@given(st.permutations(["a", "a", "o", "w", "w", "s"]))
def test_a_sync_before_any_gradient_wait_is_a_violation(order: list[str]) -> None:
    summary = _ddp_tail([*order, "r"])
    violations = check_backward_sync(summary, expect_grad_waits=True)
    sync = order.index("s")
    late_waits = [i for i, c in enumerate(order) if c == "w" and i > sync]
    assert ("backward-sync-after-grad-waits" in _invariants(violations)) == bool(late_waits)
    assert (violations == []) == (sync == len(order) - 1)


def test_a_ddp_backward_without_waits_is_a_violation() -> None:
    violations = check_backward_sync(_ddp_tail(["a", "o", "s", "r"]), expect_grad_waits=True)
    assert _invariants(violations) == ["backward-sync-after-grad-waits"]
