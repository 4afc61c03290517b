"""Known upstream defect ``legacy-executor-miscounts-te-2.9-saved-tensors``: thunder 0.2.2's and 0.2.3's legacy TE
executor cannot unpack what TE 2.9's _Linear forward saves: every TE linear raises ValueError in the computation
trace."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import BisectedBound, FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="legacy-executor-miscounts-te-2.9-saved-tensors",
    summary="thunder 0.2.2's and 0.2.3's legacy TE executor cannot unpack what TE 2.9's _Linear forward "
    "saves: every TE linear raises ValueError in the computation trace",
    executors=("legacy",),
    signature=signatures.LEGACY_UNPACK_AT_TE_LINEAR,
    checks=checks.TE_RUNS + checks.LEGACY_SYNC,
    thunder=">=0.2.2.dev0,<=0.2.4.dev20250622",
    te=">=2.9,<2.10",
    cause="read in the wheels: the trace unpacks te_linear_N's result into as many saved tensors as its meta names (5 in "
    "0.2.2; 8 in 0.2.3, via _get_num_saved_tensors), but TE 2.9.0's _Linear.forward saves 6, so the unpack raises. Run with "
    "TE 2.9.0 only. GPU bisects: fixed in 0.2.4 (input_quantizer.internal = True there, not shown to be the fix); starts at "
    "0.2.2.dev0, 0.2.1 failing otherwise (docs/results/h200-te2.9.0-04f6fc3-bisects/miscount-from)",
    seen=("docs/results/h200-te2.9.0-2bafd7a", "docs/results/h200-te2.9.0-28d36b3", "docs/results/h200-te2.9.0-363ddd5", "docs/results/h200-te2.9.0-04f6fc3"),
    bounds=(BisectedBound("thunder", "<=0.2.4.dev20250622", "docs/results/h200-te2.9.0-363ddd5-bisects/miscount-fix/bisect.json"),),
    # TE 2.10+ takes TE from the legacy executor (its CPUOffloadEnabled import), so nothing unpacks TE's saved tensors:
    # the legacy sync checks that raised with TE 2.9.0 pass with TE 2.20.2 on the same builds.
    fixed=(FixSeen("te", "<2.10", "docs/results/h100-matrix-a42f2cc/te-2.20.2/te2.20.2-th0.2.2.json.gz"),),
)
