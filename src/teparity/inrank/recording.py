"""What a side's step leaves to compare, read inside the rank: the FP8 state after the step (eager TE's modules, or
thunder's states through its traces), and thunder's execution traces of the call that ran, summarized
(``teparity.trace_summary``), with its cache entries and, for the legacy executor, its autocast facts."""

from __future__ import annotations

from typing import Any

from teparity.inrank import fp8state
from teparity.inrank.program import Program
from teparity.records import CaseRun, PairSpec, Snapshot
from teparity.stack.executors import ExecutorInfo, executor_module
from teparity.trace_summary import summarize


def step_state(run: CaseRun, program: Program, rank: int, info: ExecutorInfo, recipe: Any, spec: PairSpec,
               step: int) -> Snapshot:
    """The FP8 state after a step: where no backward ran (inference, an evaluation step), the forward roles alone (the
    backward roles are the last training step's, and thunder's snapshot reads them through a backward trace that did
    not run)."""
    if program.runs_eager:
        state = fp8state.eager_snapshot(program.state_module() if program.state_module else program.network)
    else:
        state = thunder_snapshot(run, program.network, rank, info, recipe, spec)
    return state if spec.trains_at(step) else fp8state.forward_roles(state)


def last_traces(compiled: Any, spec: PairSpec) -> tuple[Any, Any | None, int | None]:
    """(forward, backward or None without one, cache entries or None where thunder does not count them)
    execution traces of the last call. thunderfx must have handed the whole program to one thunder
    subgraph, compiled once: the checks read one trace per direction, and a Dynamo graph compiled again (a
    recompile, at a distributed wrapper's hook, say) is a thunder program with an FP8 state of its own. Its
    count is the Dynamo graphs compiled (None where the build does not say)."""
    import thunder

    if spec.compile_path == "thunderfx":
        forwards, backwards = compiled.last_traces, compiled.last_backward_traces
        graphs = getattr(getattr(compiled, "_backend", None), "subgraph_infos", None)
        if len(forwards) != 1:
            raise AssertionError(f"thunderfx made {len(forwards)} thunder programs of the program "
                                 f"({'?' if graphs is None else len(graphs)} Dynamo graph(s) compiled: graph breaks or "
                                 "recompiles), expected 1")
        return forwards[0], (backwards[0] if backwards else None), (None if graphs is None else len(graphs))
    backwards = executed_backward_traces(compiled)
    return thunder.last_traces(compiled)[-1], (backwards[-1] if backwards else None), thunder.cache_misses(compiled)


def executed_backward_traces(compiled: Any) -> Any:
    """The backward traces of the cache entry the last call ran. ``thunder.last_backward_traces`` are those of the
    entry compiled last: a cache hit updates ``last_traces`` only (thunder/__init__.py), so after a call of an older
    entry (an earlier input shape) it pairs that entry's forward with another entry's backward and its FP8 states."""
    import thunder

    forward = thunder.last_traces(compiled)
    for entry in getattr(thunder.compile_stats(compiled), "interpreter_cache", ()):
        if getattr(entry, "computation_traces", None) is forward:
            return entry.backward_traces
    return thunder.last_backward_traces(compiled)


def thunder_snapshot(run: CaseRun, compiled: Any, rank: int, info: ExecutorInfo, recipe: Any, spec: PairSpec) -> Snapshot:
    """Record the last forward and backward execution traces in ``run`` (with the compiled cache entries
    and the legacy autocast facts) before reading the FP8 state through them: if the state cannot be
    read, the traces still tell whether TE held the linears."""
    forward, backward, run.cache_entries = last_traces(compiled, spec)
    run.forward = summarize(forward, f"rank {rank} forward trace")
    run.backward = None if backward is None else summarize(backward, f"rank {rank} backward trace")
    if info.kind == "legacy":
        run.legacy_autocast = _legacy_autocast_facts(info, forward, recipe)
        return fp8state.legacy_snapshot(forward, run.linear_names)
    return fp8state.functional_snapshot(forward, backward, run.linear_names)


def _legacy_autocast_facts(info: ExecutorInfo, forward_trace: Any, recipe: Any) -> dict[str, bool]:
    """Is the legacy forward program wrapped in fp8_autocast, and bound to the recipe we passed?"""
    module = executor_module(info)
    wrapper = getattr(module, "TE_CTX_STR", "fp8_autocast(")
    return {
        "wrapped": wrapper in forward_trace.python(),
        "recipe_is_ours": forward_trace.python_ctx().get("te_fp8_recipe") is recipe,
    }
