"""The gate's checks, by name: each is a row of the parity report (a test marks it with
``@pytest.mark.check(NAME)``, or ``@pytest.mark.check(NAME, "{param}-...")`` for a row per parametrization, the
format filled from the test's parameters: ``numerics[delayed]``), what the known-defect registry's entries cover,
and a column of the compatibility matrix (``GROUPS``)."""

from __future__ import annotations

# -- trace tier: the legacy executor's backward FP8 sync, thunder's DDP and FSDP transforms ---------------
BWD_SYNC_PLACEMENT = "bwd-sync-placement"
BWD_SYNC_RUNS_ONCE = "bwd-sync-runs-once"
FWD_HAS_NO_SYNC = "fwd-has-no-sync"
TE_CLAIMS_EVERY_LINEAR = "te-claims-every-linear"
TE_TRACE_INVARIANTS = "te-trace-invariants"
DDP_TRANSFORM = "ddp-transform-matches-torch-ddp"
FSDP_TRANSFORM = "fsdp-transform-matches-torch-fsdp"
# -- numerics tier -----------------------------------------------------------------------------------------
NUMERICS = "numerics"
NUMERICS_FP32_BIAS = "numerics-fp32-bias"
# -- features tier -----------------------------------------------------------------------------------------
ACTIVATION_CHECKPOINTING = "activation-checkpointing"
THUNDERFX = "thunderfx"
RECIPE_CHANGE = "recipe-change"
INFERENCE = "inference"
TORCH_AUTOCAST = "torch-autocast"
LLAMA_BLOCK = "llama-block"
# -- ddp tier ----------------------------------------------------------------------------------------------
DDP = "ddp"
DDP_FIRST_STEP = "ddp-first-step"
DDP_GRAD_ACCUMULATION = "ddp-grad-accumulation"
DDP_FP8_GROUP_PER_RANK = "ddp-fp8-group-per-rank"
DDP_FP8_GROUP_SUBGROUPS_OF_2 = "ddp-fp8-group-subgroups-of-2"
DDP_LLAMA = "ddp-llama"
DDP_LLAMA_GRAD_ACCUMULATION = "ddp-llama-grad-accumulation"
# -- fsdp tier ---------------------------------------------------------------------------------------------
FSDP = "fsdp"
FSDP_LLAMA = "fsdp-llama"
FSDP_GRAD_ACCUMULATION = "fsdp-grad-accumulation"

#: Every check, in the order the tiers run them.
ALL = (
    BWD_SYNC_PLACEMENT, BWD_SYNC_RUNS_ONCE, FWD_HAS_NO_SYNC, TE_CLAIMS_EVERY_LINEAR, TE_TRACE_INVARIANTS, DDP_TRANSFORM,
    FSDP_TRANSFORM, NUMERICS, NUMERICS_FP32_BIAS, ACTIVATION_CHECKPOINTING, THUNDERFX, RECIPE_CHANGE, INFERENCE,
    TORCH_AUTOCAST, LLAMA_BLOCK, DDP, DDP_FIRST_STEP, DDP_GRAD_ACCUMULATION, DDP_FP8_GROUP_PER_RANK,
    DDP_FP8_GROUP_SUBGROUPS_OF_2, DDP_LLAMA, DDP_LLAMA_GRAD_ACCUMULATION, FSDP, FSDP_LLAMA, FSDP_GRAD_ACCUMULATION,
)
#: The checks that run the legacy executor's TE linears where TE is installed (the legacy sync scenarios).
LEGACY_SYNC = (BWD_SYNC_PLACEMENT, BWD_SYNC_RUNS_ONCE, FWD_HAS_NO_SYNC)
#: Every check that needs TE to run a linear.
TE_RUNS = (
    TE_CLAIMS_EVERY_LINEAR, TE_TRACE_INVARIANTS, NUMERICS, NUMERICS_FP32_BIAS, DDP, DDP_FIRST_STEP, DDP_GRAD_ACCUMULATION,
    DDP_FP8_GROUP_PER_RANK, DDP_FP8_GROUP_SUBGROUPS_OF_2, DDP_LLAMA, DDP_LLAMA_GRAD_ACCUMULATION, ACTIVATION_CHECKPOINTING,
    THUNDERFX, RECIPE_CHANGE, INFERENCE, TORCH_AUTOCAST, LLAMA_BLOCK, FSDP, FSDP_LLAMA, FSDP_GRAD_ACCUMULATION,
)
FP8_GROUPS = (DDP_FP8_GROUP_PER_RANK, DDP_FP8_GROUP_SUBGROUPS_OF_2)
#: Every check that trains the llama block (what thunder does to its attention and fusions, it does in each of them).
LLAMA_RUNS = (LLAMA_BLOCK, DDP_LLAMA, DDP_LLAMA_GRAD_ACCUMULATION, FSDP_LLAMA)
#: The compatibility matrix's column of a check (the checks not named here have a column of their own).
GROUPS: dict[str, str] = {
    BWD_SYNC_PLACEMENT: "backward sync",
    BWD_SYNC_RUNS_ONCE: "backward sync",
    FWD_HAS_NO_SYNC: "backward sync",
    TE_CLAIMS_EVERY_LINEAR: "TE claims",
    TE_TRACE_INVARIANTS: "trace invariants",
    NUMERICS: "numerics",
    NUMERICS_FP32_BIAS: "fp32 + bias",
    DDP_FIRST_STEP: "ddp",
    DDP: "ddp",
    DDP_GRAD_ACCUMULATION: "grad accumulation",
    DDP_FP8_GROUP_PER_RANK: "fp8 groups",
    DDP_FP8_GROUP_SUBGROUPS_OF_2: "fp8 groups",
    DDP_TRANSFORM: "ddp transform",
}


def row(check: str, parameters: str | None = None) -> str:
    """A report row: the check, and its parameter part where it has one (``numerics[delayed]``)."""
    return f"{check}[{parameters}]" if parameters else check


def base(row_name: str) -> str:
    """The check of a report row."""
    return row_name.split("[", 1)[0]
