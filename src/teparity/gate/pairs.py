"""The ``parity`` fixture's object: run a parity pair on the session's ranks and judge it, so that a tier
test says only what it runs and what it expects.

A side is deterministic for its spec, world size and scale update, and a process's injected mutations
and settings are fixed, so each side runs once per pytest process and later requests are served from
``_SIDE_RUNS``: the eager reference serves both executors, hypothesis's replay of a failing example runs
nothing again, and ``ddp-first-step`` judges step 0 of ``ddp[delayed]``'s run where both ran here.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from teparity.gate.ranks import RankRunner
from teparity.judge.compare import Comparison
from teparity.judge.parity import assert_parity, context, reference_update
from teparity.records import CaseRun, Pair, PairSpec, ScaleUpdate
from teparity.stack import reasons

SideKey = tuple[str, PairSpec, int, ScaleUpdate | None]


def feature_reason(spec: PairSpec, thunder: str | None) -> str | None:
    """Why this thunder cannot run the spec's program variant at all (absent by design), or None."""
    changes = bool(spec.recipe_ids_by_step or spec.new_recipe_each_step)
    return reasons.feature_absent(spec.executor, thunder, recipe_changes=changes, compile_path=spec.compile_path)


#: Side runs of this process, newest last (module docstring).
_SIDE_RUNS: collections.OrderedDict[SideKey, list[list[CaseRun]]] = collections.OrderedDict()
SIDE_RUNS_KEPT = 8


@dataclasses.dataclass
class Pairs:
    env: Any
    ranks: RankRunner
    #: The multi-rank backend (one-rank runs use gloo).
    backend: str
    record: Callable[[str], None]

    def run(self, spec: PairSpec, *, world_size: int = 1, measure_fused: bool = False) -> Pair:
        """Eager TE on the executor's scale-update path and thunder + the executor; with
        ``measure_fused`` also eager TE's default path where that differs. Skips, with the reason, an
        executor this thunder lacks or a recipe it declines."""
        from teparity.stack import recipes

        if reason := (
            reasons.no_executor(self.env, spec.executor)
            or next(filter(None, (recipes.declined(r, spec.executor) for r in dict.fromkeys((spec.recipe_id, *spec.recipe_ids_by_step)))), None)
            or feature_reason(spec, self.env.versions.thunder)
        ):
            pytest.skip(reason)
        update = reference_update(spec.executor)
        wanted = [("eager", update), ("thunder", None)]
        if measure_fused and update != "fused":
            wanted.append(("eager", "fused"))
        eager, thunder, *fused = self._sides(spec, world_size, wanted)
        backend = self.backend if world_size > 1 else "gloo"
        return Pair(spec, world_size, backend, update, eager, thunder, fused[0] if fused else None)

    def _sides(self, spec: PairSpec, world_size: int, wanted: list[tuple[str, ScaleUpdate | None]]) -> list[list[list[CaseRun]]]:
        """Each wanted (side, scale update) of ``spec``: from ``_SIDE_RUNS``, or run, all those not kept there
        side by side (``RankRunner.side_by_side``)."""
        if spec.fsdp:  # thunder fsdp against torch FSDP2 (teparity.inrank.fsdp_sides)
            from teparity.inrank.fsdp_sides import run_eager_fsdp as run_eager
            from teparity.inrank.fsdp_sides import run_thunder_fsdp as run_thunder
        else:
            from teparity.inrank.sides import run_eager, run_thunder
        # The eager side never consults the executor, nor thunder's FSDP bucketing; the DDP reference of an FSDP pair
        # does not shard (one run serves ZeRO2 and ZeRO3).
        eager_spec = dataclasses.replace(spec, executor="legacy", fsdp_bucketing=None)
        if spec.fsdp and spec.fsdp_reference == "ddp":
            eager_spec = dataclasses.replace(eager_spec, fsdp="ZERO2")
        keys: list[SideKey] = [(side, eager_spec if side == "eager" else spec, world_size, update) for side, update in wanted]
        missing = list(dict.fromkeys(key for key in keys if key not in _SIDE_RUNS))
        calls = [(run_eager, (spec, key[3])) if key[0] == "eager" else (run_thunder, (spec,)) for key in missing]
        runs = dict(zip(missing, self.ranks.side_by_side(calls, world_size=world_size))) if calls else {}
        for key in keys:
            if key in runs:
                _SIDE_RUNS[key] = runs[key]
            _SIDE_RUNS.move_to_end(key)
        while len(_SIDE_RUNS) > SIDE_RUNS_KEPT:
            _SIDE_RUNS.popitem(last=False)
        return [_SIDE_RUNS[key] for key in keys]  # the newest entries: SIDE_RUNS_KEPT > 3 keeps them

    def context(self, pair: Pair) -> str:
        """The configuration of ``pair``, for messages."""
        return context(self.env, pair)

    def assert_parity(self, pair: Pair, ctx: str | None = None) -> Comparison:
        """Every check of ``teparity.judge.parity.assert_parity``; the message carries ``ctx`` (default:
        the pair's configuration)."""
        __tracebackhide__ = True
        return assert_parity(pair.eager, pair.thunder, pair.spec, ctx or self.context(pair))

    def evidence(self, summary: str) -> None:
        """The one-line summary a pass rests on, for the parity report."""
        self.record(summary)
