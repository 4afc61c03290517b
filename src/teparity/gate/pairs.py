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
from typing import Any, TypeVar

import pytest

from teparity.gate.ranks import StrategyRanks
from teparity.gate.references import reference
from teparity.report.parity import EXPOSED_PROPERTY, MODEL_PROPERTY, NUMBERS_PROPERTY
from teparity.judge.compare import Comparison
from teparity.judge.parity import assert_parity, context
from teparity.known.defect import KnownDefect, modeled_ids
from teparity.records import CaseRun, Pair, PairSpec, ScaleUpdate, reference_update
from teparity.stack import reasons

SideKey = tuple[str, PairSpec, int, ScaleUpdate | None]
Verdict = TypeVar("Verdict")


class ModelParted(AssertionError):
    """thunder differs from the model of the known defect that covers the test: more than that defect is wrong.
    No registry entry matches it, so the test fails."""


def feature_reason(spec: PairSpec, thunder: str | None) -> str | None:
    """Why this thunder cannot run the spec's program variant at all (absent by design), or None."""
    changes = bool(spec.recipe_ids_by_step or spec.new_recipe_each_step)
    return reasons.feature_absent(spec.executor, thunder, recipe_changes=changes, compile_path=spec.compile_path,
                                  cache=spec.cache)


def comparison_numbers(result: Any) -> dict[str, Any]:
    """A comparison's numbers for the report: tensors compared, the largest difference and the rule, per quantity."""
    if not isinstance(result, Comparison):
        return {}
    by_quantity: dict[str, float] = {}
    for quantity, value in result.max_abs.items():
        base = quantity.split("@")[0]
        by_quantity[base] = max(by_quantity.get(base, 0.0), value)
    return {"tensors_compared": result.compared, "max_abs": by_quantity, "max_ulps": dict(result.max_ulps),
            "allowed": dict(result.allowed)}


def _shows_a_raise(failure: AssertionError) -> bool:
    """Whether a judge's failure lists the cases that raised (``PartedFromEager``'s ``case_errors``)."""
    return bool(getattr(failure, "evidence", {}).get("case_errors"))


def _eager_spec(spec: PairSpec) -> PairSpec:
    """The eager side's spec: it never consults the executor, nor what its strategy sets aside (``Strategy.eager_spec``)."""
    return spec.parallel.eager_spec(dataclasses.replace(spec, executor="legacy"))


#: Side runs of this process, newest last (module docstring).
_SIDE_RUNS: collections.OrderedDict[SideKey, list[list[CaseRun]]] = collections.OrderedDict()
SIDE_RUNS_KEPT = 8


@dataclasses.dataclass
class Pairs:
    env: Any
    #: The session's ranks, by the world size of a spec's strategy.
    ranks: StrategyRanks
    #: The multi-rank backend (one-rank runs use gloo).
    backend: str
    record: Callable[[str], None]
    #: The known upstream defect with a model that covers this test on this stack (``known_marks.covering``).
    modeled_by: KnownDefect | None = None
    #: Record a (key, value) of the test for the parity report (``teparity.report.parity``'s properties).
    note: Callable[[str, Any], None] = lambda key, value: None

    def run(self, spec: PairSpec, *, measure_fused: bool = False) -> Pair:
        """Eager TE on the executor's scale-update path and thunder + the executor, on the ranks of the spec's strategy
        (and its reference for the session's backend where it has a choice); with ``measure_fused`` also eager TE's
        default path where that differs. Skips, with the reason, a strategy that cannot run here, an executor this
        thunder lacks or a recipe it declines."""
        from teparity.stack import recipes

        strategy = spec.parallel
        world_size = self.ranks.world_size(strategy)
        if reason := (
            self.ranks.absent(strategy)
            or reasons.no_executor(self.env, spec.executor)
            or next(filter(None, (recipes.declined(r, spec.executor, self.env) for r in dict.fromkeys((spec.recipe_id, *spec.recipe_ids_by_step)))), None)
            or feature_reason(spec, self.env.versions.thunder)
        ):
            pytest.skip(reason)
        if spec.reference is None and (chosen := strategy.reference(self.backend, len(self.env.gpus))):
            spec = dataclasses.replace(spec, reference=chosen)
        update = reference_update(spec.executor)
        eager_spec = _eager_spec(spec)
        wanted = [("eager", eager_spec, update), ("thunder", spec, None)]
        model = self.modeled_by.model if self.modeled_by else None
        # A model's run keeps the executor: what thunder does wrong may differ by executor.
        model_spec = model.applied(dataclasses.replace(eager_spec, executor=spec.executor)) if model is not None else None
        if model_spec is not None:
            wanted.append(("eager", model_spec, update))
        if measure_fused and update != "fused":
            wanted.append(("eager", eager_spec, "fused"))
        eager, thunder, *more = self._sides(spec, world_size, wanted)
        modeled = more.pop(0) if model_spec is not None else None
        backend = self.backend if world_size > 1 else "gloo"
        return Pair(spec, world_size, backend, update, eager, thunder, more[0] if more else None, modeled,
                    model.applied(spec) if model is not None else None)

    def judge_against_te_or_model(self, pair: Pair, verdict: Callable[[Pair], Verdict]) -> Verdict:
        """``verdict`` of the pair. Where a known defect's model covers the test, thunder is judged against the true
        reference first (a pass is the XPASS that retires the entry), and where it fails there, against the model by
        the same rules: it must pass there, or the test fails as ``ModelParted`` (more than the defect differs).

        A raise is no behaviour a model predicts: where thunder raised, the registry judges a failure that shows the
        raise (only a bounded signature holds it), the reference's, or where an earlier check there hid it (a broken
        trace invariant), the model's, which waives what the covering defect breaks."""
        __tracebackhide__ = True
        if pair.modeled is None or self.modeled_by is None:
            return self._numbers(verdict(pair))
        try:
            return self._numbers(verdict(pair))
        except AssertionError as reference:
            raised = any(run.error is not None for runs in pair.thunder for run in runs)
            if raised and _shows_a_raise(reference):
                raise
            entry = self.modeled_by
            try:
                modeled = verdict(pair.against_model(entry))
            except AssertionError as parted:
                if raised and _shows_a_raise(parted):
                    self.note(EXPOSED_PROPERTY, modeled_ids(entry))  # their defects are there too (repro-table)
                    raise parted from None
                head = str(reference).splitlines()[0][:300]
                raise ModelParted(
                    f"thunder differs from the model of known upstream defect {entry.id} ({entry.model.words}), so more "
                    f"than that defect is wrong here: {parted}\n(against eager TE itself: {head})"
                ) from None
            self.note(MODEL_PROPERTY, {"entry": entry.id, "modeled": "pass", **comparison_numbers(modeled)})
            raise

    def _numbers(self, result: Verdict) -> Verdict:
        """Record what a passing verdict compared: the tensors, the largest difference and the rule of each quantity."""
        self.note(NUMBERS_PROPERTY, comparison_numbers(result))
        return result

    def _sides(self, spec: PairSpec, world_size: int, wanted: list[tuple[str, PairSpec, ScaleUpdate | None]]) -> list[list[list[CaseRun]]]:
        """Each wanted (side, its spec, scale update): from ``_SIDE_RUNS``, or run, all those not kept there side by
        side (``RankRunner.side_by_side``)."""
        from teparity.inrank.sides import run_eager, run_thunder
        keys: list[SideKey] = [(side, side_spec, world_size, update) for side, side_spec, update in wanted]
        missing = list(dict.fromkeys(key for key in keys if key not in _SIDE_RUNS))
        # An eager side runs with the pair's executor (its rank code looks the executor up, and never uses it): a
        # reference, keyed by its own spec.
        calls = [reference(run_eager, dataclasses.replace(key[1], executor=spec.executor), key[3], keyed_by=(key[1], key[3]))
                 if key[0] == "eager" else (run_thunder, (key[1],)) for key in missing]
        runs = dict(zip(missing, self.ranks.side_by_side(calls))) if calls else {}
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
        the pair's configuration). For a pair judged against a defect's model (``Pair.against_model``), against the
        model and what it predicts."""
        __tracebackhide__ = True
        ctx = ctx or self.context(pair)
        if (entry := pair.judged_against) is None or entry.model is None:
            return assert_parity(pair.eager, pair.thunder, pair.spec, ctx)
        model = entry.model
        return assert_parity(pair.eager, pair.thunder, pair.spec, f"against the model of {entry.id} ({model.words}); {ctx}",
                             te_claims=model.te_claims, waived=model.waived)

    def evidence(self, summary: str) -> None:
        """The one-line summary a pass rests on, for the parity report."""
        self.record(summary)
