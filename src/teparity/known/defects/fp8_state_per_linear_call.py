"""Known upstream defect ``fp8-state-per-linear-call``: thunder's TE executors keep an FP8 state per call of a linear:
a linear called twice in a forward has two, where eager TE's module keeps one for both calls."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="fp8-state-per-linear-call",
    summary="thunder's TE executors keep an FP8 state per call of a linear: a linear called twice in a forward has "
    "two, where eager TE's module keeps one for both calls",
    executors=("legacy", "functional"),
    signature=signatures.STATE_PER_CALL,
    checks=(checks.LINEAR_CALLED_TWICE,),
    thunder=">=0.2.0.dev20240728",
    te=">=1.6",
    cause="each linear of the trace is a TE linear of its own with its own state (legacy: a TELinear per te_linear_N "
    "symbol, transformer_engine_v1ex.py; functional: get_te_fp8_state is a stateful operator, a TERecipeState per "
    "bound symbol, extend/__init__.py register_stateful_operator); eager te.Linear records both calls' amaxes in "
    "its one fp8_meta",
    model=models.STATE_PER_LINEAR_CALL,
    seen=("docs/results/h200-te2.9.0-13aaff2-combinations", "docs/results/h200-te2.20.2-640b276-combinations"),
)
