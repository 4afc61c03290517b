"""Known upstream defect ``thunderfx-cannot-interpret-torch-2.12-fx-codegen``: a thunder/torch pairing: on torch 2.12
thunderfx raises at its first call, inside torch.fx's code generation of the split graph module, which thunder's
interpreter traces."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="thunderfx-cannot-interpret-torch-2.12-fx-codegen",
    summary="a thunder/torch pairing: on torch 2.12 thunderfx raises at its first call, inside torch.fx's code "
    "generation of the split graph module, which thunder's interpreter traces",
    executors=(None, "legacy", "functional"),
    signature=signatures.FX_CODEGEN_NOT_INTERPRETED,
    checks=(checks.THUNDERFX_TRANSFORM, checks.THUNDERFX, checks.DDP_THUNDERFX, checks.FSDP2_THUNDERFX,
            "activation-checkpointing[thunderfx-delayed]", "activation-checkpointing[thunderfx-delayed-e4m3-len4-max]",
            "fsdp-activation-checkpointing[fsdp2-thunderfx-zero3]"),
    thunder=">=0.2.1",
    te=">=1.6",
    without_te=True,
    torch=">=2.12",
    cause="torch 2.12's GraphModule recompiles lazily, so thunder's interpreter traces torch/fx/graph.py _python_code "
    "when thunderfx first calls a split module: from 0.2.5 it fails on `len(user.users.keys())` in delete_unused_values "
    "(thunder/core/interpreter.py's len() has no keys view: thunder.jit of `len(d.keys())` raises on torch 2.11 too), "
    "0.2.1 .. 0.2.4 on the Graph's node list. Every declared build raises on the CPU with torch 2.12.1 "
    "(thunderfx-matches-torch), 0.2.6 with 2.12.0 too, none with 2.11.0. The TE rows compiled with thunderfx meet the "
    "same call: covered by reading, not run (the GPU hosts have torch 2.11.0)",
    seen=("docs/results/cpu-torch2.12.1-301e53a",),
)
