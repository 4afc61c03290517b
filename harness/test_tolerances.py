"""The tightened comparison rules hold the evidence they came from: every committed passing GPU run's largest
difference, per class of comparison, fits 16 times within its rule (``teparity.judge.tolerances``). A rule
tightened past what a committed run showed, or a committed run that would fail it, fails here."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teparity.reportfile import json_files, read_json
from teparity.judge import tolerances
from harness import REPO

_MAX_ABS = re.compile(r"max\|d\| (output|grad)@step\d+ ([0-9.e+-]+)")
_MAX_ULP = re.compile(r"max ulp (amax_history|scale) (\d+)")
#: The checks whose comparisons on 1-2 ranks the tables judged before they were tightened.
_LLAMA = ("llama-block", "ddp-llama")


def _gpu_reports() -> Iterator[dict[str, Any]]:
    """Every committed GPU parity report."""
    for path in json_files(REPO / "docs" / "results", "h200-*/**/*"):
        try:
            report = read_json(path)
        except ValueError:
            continue
        if isinstance(report, dict) and "results" in report:
            yield report


def _passing_gpu_evidence() -> list[tuple[str, str, int, str]]:
    """(check, executor, world size, evidence) of every passing test of every committed GPU parity report."""
    found = []
    for report in _gpu_reports():
        world = report.get("environment", {}).get("world_size") or 1
        for result in report["results"]:
            ranks = world if result["check"].startswith(("ddp", "fsdp")) else 1
            found += [(result["check"], result["executor"], ranks, test["evidence"].split("; vs eager TE")[0])
                      for test in result["tests"] if test["outcome"] == "pass"]
    return found


EVIDENCE = _passing_gpu_evidence()


def _largest(llama: bool) -> tuple[float, int]:
    """The largest output or gradient difference, and FP8-state ulp distance, on 1-2 ranks outside the fsdp tier (whose
    llama states the committed runs compared under other linears' names: ``teparity.judge.tolerances``)."""
    differences, ulps = [0.0], [0]
    for check, _, ranks, evidence in EVIDENCE:
        if ranks > tolerances.TIGHT_RANKS or check.startswith("fsdp") or check.startswith(_LLAMA) != llama:
            continue
        differences += [float(value) for _, value in _MAX_ABS.findall(evidence)]
        ulps += [int(value) for _, value in _MAX_ULP.findall(evidence)]
    return max(differences), max(ulps)


def test_the_committed_runs_are_many() -> None:
    assert len(EVIDENCE) > 1000, len(EVIDENCE)


@pytest.mark.parametrize(("llama", "rule"), [(False, tolerances.TIGHT_ACTIVATION_ROUNDING), (True, tolerances.TIGHT_LLAMA)])
def test_a_tightened_rule_is_16_times_the_largest_difference_seen_as_a_power_of_two(llama: bool, rule: tolerances.Tolerance) -> None:
    largest, _ = _largest(llama)
    assert largest > 0 and rule.rtol == 0
    # A value the evidence prints with 3 significant digits: 16x it, rounded up to the next power of two.
    assert rule.atol >= tolerances.HEADROOM * largest * (1 - 5e-3), (largest, rule)
    assert rule.atol < 2 * tolerances.HEADROOM * largest, f"tighter would do: {largest} seen, {rule.atol} allowed"


def test_the_llama_state_rule_is_16_times_the_largest_ulp_distance_seen() -> None:
    _, ulps = _largest(llama=True)
    assert tolerances.HEADROOM * ulps <= tolerances.LLAMA_STATE_ULPS < 2 * tolerances.HEADROOM * ulps, ulps


def _llama_against_torch_linears() -> list[float]:
    """The largest output and gradient differences of every llama test a committed GPU report held against a model that
    runs every linear in torch (a known outcome, modeled: pass, of an entry with that model)."""
    from teparity.known.models import TORCH_RUNS_EVERY_LINEAR
    from teparity.known.registry import BY_ID

    found = []
    for report in _gpu_reports():
        for result in report["results"]:
            for test in result["tests"]:
                entry = BY_ID.get(test.get("known_defect") or "")
                numbers = test.get("numbers") or {}
                if (result["check"].startswith(("llama", "ddp-llama", "fsdp-llama")) and test.get("modeled") == "pass"
                        and entry is not None and entry.model is TORCH_RUNS_EVERY_LINEAR):
                    found += [v for q, v in (numbers.get("max_abs") or {}).items() if q in ("output", "grad")]
    return found


def test_the_llama_rule_against_torch_linears_is_16_times_the_largest_difference_seen() -> None:
    """``LLAMA_UNQUANTIZED_SEEN`` is the largest difference the committed modeled llama runs showed, and its rule is 16
    times it as a power of two: a run that showed more, or a rule tighter than the evidence, fails here."""
    seen = _llama_against_torch_linears()
    assert len(seen) > 50 and max(seen) == pytest.approx(tolerances.LLAMA_UNQUANTIZED_SEEN, rel=5e-3), max(seen)
    rule = tolerances.LLAMA_UNQUANTIZED
    assert tolerances.HEADROOM * max(seen) <= rule.atol < 2 * tolerances.HEADROOM * max(seen), (max(seen), rule)
