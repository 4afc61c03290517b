"""Known upstream defect ``checkpoint-drops-fp8-state``: thunder's state_dict holds no TE FP8 state: a run resumed from
it (compiled again, or in eager TE) starts a fresh one, where eager TE resumes its own from _extra_state."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="checkpoint-drops-fp8-state",
    summary="thunder's state_dict holds no TE FP8 state: a run resumed from it (compiled again, or in eager TE) "
    "starts a fresh one, where eager TE resumes its own from _extra_state",
    executors=("legacy", "functional"),
    signature=signatures.STATE_RESTARTS_AT_RESUME,
    checks=(checks.CHECKPOINT_RESUME,),
    thunder=">=0.2.0.dev20240728",
    te=">=1.6",
    cause="thunder/core/module.py ThunderModule.state_dict returns the original module's parameters and buffers (and "
    "ThunderModule's own extra state, which it has none of); the TE FP8 state lives in the compiled traces (legacy: "
    "the TELinear modules of transformer_engine_v1ex.py; functional: get_te_fp8_state's TERecipeState, "
    "transformer_engineex_impl.py), so nothing saves it, and a new compilation starts its own. Eager te.Linear saves "
    "it as _extra_state (module/base.py get_extra_state). thunder issue #2622 asks for it",
    model=models.FRESH_STATE_AT_RESUME,
    seen=("docs/results/h200-te2.9.0-13aaff2-combinations",),
)
