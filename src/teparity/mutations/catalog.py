"""The catalog of known regressions of thunder's TE executors, each injectable into the installed thunder at
run time. ``pytest --teparity-inject NAME`` applies one in every test process and, through ``ENV_VAR``, in
every rank, so that the gate can be shown to fail on the regression it exists to catch; ``python -m teparity
kill-matrix`` runs the gate under each that applies here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from teparity.mutations import compiling, distributed, functional, inference, legacy, module, patching, thunderfx
from teparity.stack.reasons import mutation_inapplicable

if TYPE_CHECKING:
    from teparity.stack.environment import Environment

ENV_VAR = "TEPARITY_INJECT"
#: What the installed stack must have for a mutation to apply (``teparity.stack.reasons.mutation_inapplicable``).
Requirement = Literal[
    "legacy-sync", "legacy-te", "functional-te", "functional-fp8-group", "functional-checkpointing", "te",
    "ddp-transform", "fsdp-transform", "thunderfx", "te-inference",
]


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    description: str
    #: What the installed stack must have for the mutation to apply (the apply function checks too).
    requires: Requirement
    apply: Callable[[], None]
    #: The report rows that fail under it (``"numerics[delayed]"``, ``"fsdp[*]"`` for every parametrization) and how,
    #: in words (the README's table: ``python -m teparity mutations``).
    killed_by: tuple[str, ...] = ()
    kill_note: str = ""

    def unavailable_reason(self, env: Environment) -> str | None:
        """Why this mutation does not apply here, or None."""
        return mutation_inapplicable(self.requires, env)


CATALOG: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation(
            "sync-after-return",
            "the backward FP8 sync appended after the backward trace's return, so it never runs "
            "(the bug fixed by thunder PR #591, 2024-06-14)",
            "legacy-sync",
            lambda: legacy.patch_sync_insertion(legacy.place_after_return),
            killed_by=("bwd-sync-placement[*]", "bwd-sync-runs-once[*]", "te-trace-invariants", "ddp-first-step"),
            kill_note="the sync checks on the CPU too",
        ),
        Mutation(
            "sync-missing",
            "the backward FP8 sync never inserted: backward amax/scale updates silently stop",
            "legacy-sync",
            lambda: legacy.patch_sync_insertion(legacy.place_nowhere),
            killed_by=("bwd-sync-placement[*]", "bwd-sync-runs-once[*]", "numerics[delayed]"),
            kill_note="the sync checks on the CPU too",
        ),
        Mutation(
            "sync-duplicated",
            "the backward FP8 sync inserted twice: amax histories roll twice per step",
            "legacy-sync",
            lambda: legacy.patch_sync_insertion(legacy.place_twice),
            killed_by=("bwd-sync-placement[*]", "bwd-sync-runs-once[*]"),
            kill_note="on the CPU too",
        ),
        Mutation(
            "legacy-scale-perturbed",
            f"the legacy executor's forward scales off by a factor {patching.PERTURBATION} after every backward sync",
            "legacy-te",
            legacy.perturb_scale,
            killed_by=("numerics[delayed]", "ddp-first-step", "fsdp-activation-checkpointing[zero2]", "fp8-switched[off]",
                       "fp8-switched[warm-up]", "fp8-off-ends", "ddp-fp8-switched[warm-up]"),
            kill_note="`ddp-first-step`: FP8 state, bitwise; `fsdp-activation-checkpointing` and the FP8-switching rows: "
            "against their models on 0.2.4 .. 0.2.6",
        ),
        Mutation(
            "functional-scale-perturbed",
            f"the functional executor's scale update off by a factor {patching.PERTURBATION}",
            "functional-te",
            lambda: functional.patch_update(functional.perturbed),
            killed_by=("ddp-first-step", "fp8-switched[warm-up]", "fp8-off-ends", "ddp-fp8-switched[warm-up]"),
            kill_note="FP8 state, bitwise (the FP8-switching rows: against their models)",
        ),
        Mutation(
            "functional-amax-update-dropped",
            "the functional executor's per-linear amax/scale update does nothing",
            "functional-te",
            lambda: functional.patch_update(functional.dropped),
            killed_by=("ddp-first-step",),
            kill_note="FP8 state",
        ),
        Mutation(
            "functional-no-cross-rank-reduction",
            "the functional amax update without its cross-rank all-reduce (before thunder PR #2404)",
            "functional-te",
            functional.no_cross_rank_reduction,
            killed_by=("ddp-first-step", "ddp-thunderfx"),
            kill_note="FP8 state across ranks",
        ),
        Mutation(
            "fsdp-forward-amax-not-reduced",
            "under thunder's FSDP the functional executor's forward amax updates skip their cross-rank all-reduce: each "
            "rank's forward scales follow its own inputs",
            "functional-te",
            functional.no_forward_reduction_under_fsdp,
            killed_by=("fsdp[*]", "fsdp-llama[*]"),
            kill_note="FP8 state across ranks and against the reference",
        ),
        Mutation(
            "no-grad-torch-linear-off",
            f"the linears thunder leaves to torch under torch.no_grad off by a factor {functional.NO_GRAD_OFF}",
            "functional-te",
            functional.thunder_torch_linear_off_under_no_grad,
            killed_by=("inference[*]",),
            kill_note="against its model: every linear in torch",
        ),
        Mutation(
            "recipe-change-state-of-another-history",
            "a recipe change's fresh functional recipe state built with half the recipe's amax history length",
            "functional-te",
            functional.new_recipe_state_of_another_history,
            killed_by=("recipe-change[*]", "fp8-switched[no-autocast]"),
            kill_note="against its model: a fresh state per recipe object",
        ),
        Mutation(
            "no-sync-weight-grads-scaled",
            f"the functional executor's weight gradients off by a factor {patching.PERTURBATION} in the micro-batches "
            "that skip the gradient all-reduce",
            "functional-te",
            functional.no_sync_weight_grads_scaled,
            killed_by=("ddp-grad-accumulation", "ddp-llama-grad-accumulation", "fsdp-grad-accumulation[*]"),
            kill_note="against their model: one FP8 state per cache entry; with TE 2.9.0 not `ddp-grad-accumulation`, whose bf16 "
                      "weight gradients round the factor away",
        ),
        Mutation(
            "fp8-group-amax-summed",
            "under an fp8 group the functional amax all-reduce sums the ranks' amaxes instead of taking the maximum",
            "functional-te",
            functional.fp8_group_amax_summed,
            killed_by=("ddp-fp8-group-per-rank",),
            kill_note="against its model: amaxes reduced over the world",
        ),
        Mutation(
            "fp8-group-ignored",
            "the functional amax reduction over the default group instead of fp8_autocast's fp8_group",
            "functional-fp8-group",
            functional.fp8_group_ignored,
            killed_by=("ddp-fp8-group-per-rank",),
            kill_note="on a build that honours `fp8_group`; none does yet: its strict xfails",
        ),
        Mutation(
            "first-module-token-kept",
            "the legacy executor stops consuming TE's first-module token, so TE syncs in backward too",
            "legacy-te",
            legacy.first_module_token_kept,
            killed_by=("ddp-first-step",),
            kill_note="2 syncs per backward, FP8 state",
        ),
        Mutation(
            "autocast-wrapper-dropped",
            "the legacy forward program no longer wrapped in fp8_autocast: TE's modules run outside FP8",
            "legacy-te",
            lambda: legacy.patch_autocast_wrapper(lambda module: "# teparity mutant: fp8_autocast wrapper dropped"),
            killed_by=("te-trace-invariants",),
            kill_note="the run raises on TE's non-FP8 path",
        ),
        Mutation(
            "autocast-recipe-dropped",
            "the legacy forward wrapped in fp8_autocast() without the recipe the user passed: TE's default "
            "recipe runs (numerically invisible when the user's recipe is the default)",
            "legacy-te",
            lambda: legacy.patch_autocast_wrapper(lambda module: module.TE_CTX_STR.replace(f"fp8_recipe={module.FP8_RECIPE_KEY}", "")),
            killed_by=("te-trace-invariants",),
            kill_note="forward-in-fp8-autocast; no number shows it when the recipe is the default",
        ),
        Mutation(
            "forward-linear-recomputed",
            "the functional backward recomputes each forward TE linear instead of using the saved "
            "quantized tensors: a second GEMM per linear, and its quantization writes the amaxes again",
            "functional-te",
            lambda: functional.grad_transform(recompute_forward=True),
            killed_by=("te-trace-invariants",),
            kill_note="no forward TE linear in the backward",
        ),
        Mutation(
            "functional-backward-update-missing",
            "the functional grad transform without the backward amax/scale update: grad_output scales never move",
            "functional-te",
            lambda: functional.grad_transform(backward_update=False),
            killed_by=("te-trace-invariants", "ddp-first-step"),
            kill_note="`te-trace-invariants`: one update per linear",
        ),
        Mutation(
            "amax-updates-duplicated",
            "every functional amax/scale update applied twice: histories roll twice per step",
            "functional-te",
            lambda: functional.patch_update(functional.twice),
            killed_by=("ddp-first-step", "linear-called-twice"),
            kill_note="FP8 state (`linear-called-twice`: against its model, a state per call)",
        ),
        Mutation(
            "checkpointing-transform-skipped",
            "thunder's TE activation-checkpointing transform skipped: the recomputed linears update their FP8 "
            "state again in the backward (twice per step)",
            "functional-checkpointing",
            functional.checkpointing_transform_skipped,
            killed_by=("activation-checkpointing[jit-delayed]", "fsdp-activation-checkpointing[zero3]"),
            kill_note="one update per FP8 state",
        ),
        Mutation(
            "recipe-change-state-kept",
            "the functional executor's recipe state reused across recipe objects: a recipe change keeps the "
            "old FP8 state",
            "functional-te",
            functional.recipe_state_kept,
            killed_by=("recipe-change[alternate]",),
            kill_note="a failure outside its known defect's signature",
        ),
        Mutation(
            "autocast-linear-not-downcast",
            "thunder's autocast rule for linear no longer downcasts its operands: under torch.autocast the linear "
            "gets fp32 operands where eager TE's autocast computes in bfloat16",
            "te",
            distributed.linear_not_downcast_under_autocast,
            killed_by=("torch-autocast",),
            kill_note="a failure outside its known defect's signature",
        ),
        Mutation(
            "ddp-gradient-not-reduced",
            "thunder's DDP transform leaves the last parameter unsynchronized: its gradient is never all-reduced",
            "ddp-transform",
            distributed.ddp_gradient_not_reduced,
            killed_by=("ddp-transform-matches-torch-ddp",),
            kill_note="on the CPU",
        ),
        Mutation(
            "fsdp-gradient-not-reduced",
            "thunder's FSDP backward keeps each rank's own slice of its gradient instead of reduce-scattering it: "
            "sharded gradients are never summed across ranks",
            "fsdp-transform",
            distributed.fsdp_gradient_not_reduced,
            killed_by=("fsdp-transform-matches-torch-fsdp[*]",),
            kill_note="on the CPU",
        ),
        Mutation(
            "state-dict-initial-weights",
            "thunder's state_dict returns the parameters as they were at compilation: a checkpoint loses the training "
            "so far",
            "te",
            module.state_dict_of_initial_weights,
            killed_by=("checkpoint-resume[*]",),
            kill_note="against its model: a resumed run without FP8 state",
        ),
        Mutation(
            "recompile-carries-another-state",
            "a functional FP8 state made after another of its direction was updated (a cache entry compiled later) "
            "starts from that other linear's amax history and scale instead of a fresh one",
            "functional-te",
            functional.recompile_carries_another_state,
            killed_by=("new-input-shape[sequence-length-default]", "checkpoint-resume[thunder]"),
            kill_note="against their models: an FP8 state per cache entry, a fresh one after the checkpoint",
        ),
        Mutation(
            "frozen-parameters-trained",
            "thunder's module wrapper makes every parameter require grad: a frozen weight gets a gradient and trains",
            "te",
            module.frozen_parameters_trained,
            killed_by=("frozen-base-adapter",),
            kill_note="the gradients of the trained parameters only, on both sides",
        ),
        Mutation(
            "thunderfx-recompiles-every-call",
            "every thunder program thunderfx makes of a Dynamo graph compiled again at each call (a Dynamo recompile at a "
            "distributed wrapper's hook, each step): every FP8 state starts over",
            "thunderfx",
            thunderfx.recompiles_every_call,
            killed_by=("thunderfx-matches-torch[*]", "ddp-thunderfx"),
            kill_note="a compile per step, on the CPU too; `ddp-thunderfx`: FP8 state against torch DDP + eager TE from step 1",
        ),
        Mutation(
            "thunderfx-jits-the-whole-module",
            "thunderfx hands the whole module to thunder.jit, no Dynamo split: TE's own modules, which Dynamo leaves to "
            "run eagerly, are traced by thunder",
            "thunderfx",
            thunderfx.jits_the_whole_module,
            killed_by=("te-modules[thunderfx-linear]", "te-modules[thunderfx-layernorm-mlp]"),
            kill_note="a network of TE modules then raises as under thunder.jit",
        ),
        Mutation(
            "jit-leaves-te-modules-eager",
            "thunder.jit of a module holding TE's own modules hands the module back: they run eagerly, a silent "
            "fallback where thunder cannot trace them",
            "te",
            compiling.jit_leaves_te_modules_eager,
            killed_by=("te-modules[jit-linear]", "te-modules[jit-layernorm-mlp]"),
            kill_note="thunder compiled nothing: a failure outside the known raise's signature",
        ),
        Mutation(
            "cuda-graph-transform-inert",
            "thunder's CUDA graph transform hands every trace back unchanged: the program runs without CUDA graphs",
            "te",
            compiling.cuda_graph_transform_inert,
            killed_by=("cuda-graphs",),
            kill_note="no CUDA graph region in thunder's forward trace, a failure outside the known raise's signature (with TE "
            "2.10+ the functional row: the legacy executor holds no TE there)",
        ),
        Mutation(
            "checker-declines",
            "every TE executor's checker declines every linear: a silent fallback to torch",
            "te",
            distributed.decline_every_linear,
            killed_by=("te-trace-invariants",),
            kill_note="TE claims every linear",
        ),
        Mutation(
            "inference-8bit-weight-scale-off",
            "thunder's 8-bit inference stores each weight's scale 1% off the one it quantized the weight with: every "
            "quantized linear's weight dequantizes 1% small",
            "te-inference",
            inference.weight_scale_perturbed,
            killed_by=("inference-8bit[*]",),
            kill_note="against its eager model, bitwise",
        ),
    )
}


def markdown_table() -> str:
    """The catalog as the README's table: each mutation, the regression it stands for, and what kills it."""
    rows = [f"| `{m.name}` | {m.description} | {', '.join(f'`{row}`' for row in m.killed_by)} ({m.kill_note}) |"
            for m in CATALOG.values()]
    return "\n".join(["| mutation | stands for | killed by |", "|---|---|---|", *rows]) + "\n"


def active() -> list[str]:
    """Names of the mutations requested for this process tree."""
    return [name for name in os.environ.get(ENV_VAR, "").split(",") if name]


def apply(names: list[str]) -> None:
    unknown = [name for name in names if name not in CATALOG]
    if unknown:
        raise KeyError(f"unknown mutation(s) {unknown}; the catalog has {sorted(CATALOG)}")
    for name in names:
        CATALOG[name].apply()


def apply_from_env() -> None:
    """Apply what ``TEPARITY_INJECT`` asks for (called at the start of every rank)."""
    apply(active())
