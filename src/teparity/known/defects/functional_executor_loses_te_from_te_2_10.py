"""Known upstream defect ``functional-executor-loses-te-from-te-2.10``: the functional TE executor of thunder 0.2.3 ..
0.2.5.dev20250824 claims no linear with TE 2.10+: it asks the legacy executor's checker, which declines every linear
there."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="functional-executor-loses-te-from-te-2.10",
    summary="the functional TE executor of thunder 0.2.3 .. 0.2.5.dev20250824 claims no linear with TE 2.10+: it "
    "asks the legacy executor's checker, which declines every linear there",
    executors=("functional",),
    signature=signatures.LEGACY_CHECKER_LOST_TE,
    checks=checks.TE_RUNS,
    thunder=">=0.2.3,<=0.2.5.dev20250824",
    te=">=2.10",
    cause="thunder/executors/transformer_engine_v2ex_impl.py imports _linear_checker from the legacy "
    "transformer_engineex.py, which returns False unless its TE_AVAILABLE, lost with TE 2.10+ "
    "(legacy-executor-loses-te-from-te-2.10). Read in every build 0.2.3 .. 0.2.5.dev20250824, gone from 0.2.5.dev20250831 "
    "(docs/results/wheels-functional-borrows-legacy-checker). Run with TE 2.20.2 on 0.2.3, 0.2.4, 0.2.5.dev20250803; 0.2.5 "
    "and 0.2.6.dev20251019 claimed every linear",
    model=models.TORCH_RUNS_EVERY_LINEAR,
    seen=("docs/results/h200-te2.20.2-84520fd", "docs/results/h200-te2.20.2-c71c746"),
    fixed=(FixSeen("thunder", "<=0.2.5.dev20250824", "docs/results/h100-matrix-a42f2cc/te-2.20.2/te2.20.2-th0.2.5.json.gz"),),
)
