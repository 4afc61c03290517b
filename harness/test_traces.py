"""The trace invariants fire on real thunder backward traces with the sync moved, removed or duplicated."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teparity.judge.traces import (
    assert_no_violations,
    check_backward_sync,
    check_cuda_graph_regions,
    check_fp8_state_updates,
    check_no_forward_linear_in_backward,
    check_no_forward_sync,
)
from teparity.stack import reasons
from teparity.stack.envprobe import environment
from teparity.trace_summary import SymbolRow, TraceSummary, summarize


@pytest.fixture(scope="module")
def real_traces() -> tuple[Any, Any]:
    """Forward and backward execution traces of a two-linear MLP under the legacy TE executor (CPU)."""
    if reason := reasons.no_backward_sync(environment()):
        pytest.skip(reason)
    import thunder

    from teparity.inrank.networks import plain_mlp
    from teparity.inrank.syncspy import record_fp8_syncs
    from teparity.stack.executors import executor_module, find_te_executors
    from teparity.stack.thunder_api import jit_options

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


def _in_a_cuda_graph(trace: Any, first: int, last: int) -> Any:
    """``trace`` with its symbols ``first`` .. ``last`` held by one region, as thunder's CUDA graph transform makes it
    (a fusion symbol ``CUDAGraph0`` whose subsymbols are the region's)."""
    from thunder.core.symbol import BoundSymbol, Symbol

    symbols = list(trace.bound_symbols)
    held = symbols[first:last + 1]
    region = BoundSymbol(Symbol("CUDAGraph0", meta=None, is_fusion=True), (), {}, held[-1].output, held)
    return _with_bound_symbols(trace, [*symbols[:first], region, *symbols[last + 1:]])


def test_a_cuda_graph_region_is_summarized_with_the_symbols_it_holds(real_traces: tuple[Any, Any]) -> None:
    """The TE linears and the sync a CUDA graph captures are the program's: the checks see them, in order."""
    backward = real_traces[1]
    plain = summarize(backward, "bwd")
    graphed = summarize(_in_a_cuda_graph(backward, 1, len(backward.bound_symbols) - 2), "bwd")
    assert [row.name for row in graphed.rows] == [plain.rows[0].name, "CUDAGraph0", *[row.name for row in plain.rows[1:]]]
    assert check_backward_sync(graphed) == [] and check_cuda_graph_regions(graphed) == []


def test_a_program_without_a_cuda_graph_region_is_a_violation(real_traces: tuple[Any, Any]) -> None:
    assert _invariants(check_cuda_graph_regions(summarize(real_traces[0], "fwd"))) == ["cuda-graph-regions"]


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


# -- the functional executor's FP8 states over a step (activation checkpointing's promises) ---------


def _rows(label: str, symbols: list[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> TraceSummary:
    """A summary from (name, inputs, outputs) rows, shaped like the functional executor's traces."""
    rows = tuple(SymbolRow(i, name, "return" if name == "python_return" else "other", name, ins, outs)
                 for i, (name, ins, outs) in enumerate(symbols))
    return TraceSummary(label, rows)


def _checkpointed_step(*, forward_update: bool = False, recompute_state: str = "s0", extra_bwd_state: bool = False) -> tuple[TraceSummary, TraceSummary]:
    """Two linears, the first checkpointed: its forward update moved into the backward after its
    recomputation (``_te_activation_checkpointing_transform``'s result), unless ``forward_update``."""
    fwd = [
        ("get_te_fp8_recipe_0", (), ("r0",)),
        ("get_te_fp8_state_0", ("r0",), ("s0",)),
        ("get_te_fp8_quantizers_0", ("s0",), ("q0", "q1")),
        ("te_functional_linear_fwd", ("x", "t_0_weight", "q0", "q1"), ("a", "qa", "qw")),
        *([("te_fp8_amax_and_scale_update", ("r0", "s0", "a"), ("a1",))] if forward_update else []),
        ("get_te_fp8_state_1", ("r0",), ("s1",)),
        ("get_te_fp8_quantizers_1", ("s1",), ("q2", "q3")),
        ("te_functional_linear_fwd", ("a", "t_1_weight", "q2", "q3"), ("y", "qa2", "qw2")),
        ("te_fp8_amax_and_scale_update", ("r0", "s1", "y"), ("y1",)),
        ("get_te_fp8_state_2", ("r0",), ("s2",)),
        ("get_te_fp8_state_3", ("r0",), ("s3",)),
        ("python_return", ("y1",), ()),
    ]
    recompute_states = [("get_te_fp8_state_9", ("r0",), ("s9",))] if extra_bwd_state else []
    bwd = [
        *recompute_states,
        ("get_te_fp8_quantizers_4", (recompute_state,), ("q4", "q5")),
        ("te_functional_linear_fwd", ("x", "t_0_weight", "q4", "q5"), ("ar", "qar", "qwr")),
        ("te_fp8_amax_and_scale_update", ("r0", recompute_state, "ar"), ("ar1",)),
        ("get_te_fp8_quantizers_2", ("s2",), ("q6",)),
        ("te_functional_linear_bwd", ("g", "qa2", "qw2", "q2", "q3", "q6"), ("ga", "gw")),
        ("te_fp8_amax_and_scale_update", ("r0", "s2", "ga"), ("ga1",)),
        ("get_te_fp8_quantizers_3", ("s3",), ("q7",)),
        ("te_functional_linear_bwd", ("ga1", "qar", "qwr", "q4", "q5", "q7"), ("gx", "gw0")),
        ("te_fp8_amax_and_scale_update", ("r0", "s3", "gx"), ("gx1",)),
        ("python_return", ("gx1",), ()),
    ]
    return _rows("fwd", fwd), _rows("bwd", bwd)


def test_a_checkpointed_step_updates_each_fp8_state_once_and_recomputes_with_the_forward_state() -> None:
    assert check_fp8_state_updates(*_checkpointed_step(), n_linears=2) == []


def test_a_checkpointed_step_that_keeps_the_forward_update_too_is_a_violation() -> None:
    violations = check_fp8_state_updates(*_checkpointed_step(forward_update=True), n_linears=2)
    assert _invariants(violations) == ["one-update-per-fp8-state"]
    assert "get_te_fp8_state_0" in violations[0].message


def test_a_recomputation_with_a_state_of_its_own_is_a_violation() -> None:
    violations = check_fp8_state_updates(*_checkpointed_step(recompute_state="s9", extra_bwd_state=True), n_linears=2)
    assert _invariants(violations) == ["one-fp8-state-per-linear", "one-update-per-fp8-state", "recompute-reuses-forward-fp8-state"]


def test_a_forward_only_step_has_one_state_per_linear() -> None:
    forward, _ = _checkpointed_step(forward_update=True)
    only_forward = TraceSummary("fwd", tuple(r for r in forward.rows if r.name not in ("get_te_fp8_state_2", "get_te_fp8_state_3")))
    assert check_fp8_state_updates(only_forward, None, n_linears=2) == []
    assert _invariants(check_fp8_state_updates(only_forward, None, n_linears=3)) == ["one-fp8-state-per-linear"]


def test_recomputed_linears_are_counted() -> None:
    _, backward = _checkpointed_step()
    assert check_no_forward_linear_in_backward(backward, "functional", recomputed=(1, 1)) == []
    assert check_no_forward_linear_in_backward(backward, "functional", recomputed=(1, 2)) == []
    assert _invariants(check_no_forward_linear_in_backward(backward, "functional", recomputed=(2, 2))) == ["recomputed-te-linears"]
    assert _invariants(check_no_forward_linear_in_backward(backward, "functional")) == ["recomputed-te-linears"]
