"""Why the gate cannot run something here: every skip reason, in one place. Each function answers None
(it can) or the sentence a skip prints, which names what is missing and, where there is one, the option or
install behind it. Absent by design only: an installed system under test that does not import is never a
skip (``import_failure``), and a run without thunder stops at start-up (``thunder_absent``)."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING

from teparity.stack import since, te_install
from teparity.stack.symbols import BACKWARD_SYNC_SYMBOL
from teparity.stack.te_gates import gate_for
from teparity.stack.versions import build_version, parse_version

if TYPE_CHECKING:
    from teparity.stack.environment import Environment
    from teparity.stack.executors import ExecutorKind


#: The option of a deliberate run without thunder: every check skips, and the run can pass.
ALLOW_NO_THUNDER = "--teparity-allow-no-thunder"


def thunder_absent(env: Environment) -> str | None:
    """Why the gate cannot test in this Python at all (lightning-thunder, or torch too, is not installed in it), or
    None. Never a skip: every check would skip and the run pass (a CI job that forgot thunder, or ran the gate with
    another Python), so the gate stops at start-up unless ``ALLOW_NO_THUNDER`` asks for such a run."""
    if env.versions.thunder is not None:
        return None
    missing = "lightning-thunder is" if env.versions.torch is not None else "torch and lightning-thunder are"
    return (f"{missing} not installed in {sys.executable}: install the thunder under test into it (pip install "
            f"lightning-thunder, or pip install -e THUNDER_CHECKOUT), or pass {ALLOW_NO_THUNDER} to run without it")


def import_failure(env: Environment) -> str | None:
    """Why an installed system under test does not import (thunder or TE), or None: never a skip."""
    failures = []
    if env.versions.thunder is not None and env.thunder_import_error:
        failures.append(f"lightning-thunder {env.versions.thunder}: {env.thunder_import_error}")
    if env.versions.transformer_engine is not None and env.te_import_error:
        failures.append(f"TransformerEngine {env.versions.transformer_engine}: {env.te_import_error}")
    return "; ".join(failures) or None


def unsupported_pair(env: Environment) -> str | None:
    """Why this thunder build's legacy TE executor refuses this TE at all (its version gate, as thunder
    compares it: te_gates.py, the TE version as its metadata says; the thunder build as placed), or None: such a pair can
    only fall back to torch or fail, so the gate fails it rather than testing what is left."""
    thunder, te = parse_version(env.versions.thunder or ""), env.versions.installed_as("transformer_engine")
    if thunder is None or te is None or (gate := gate_for(thunder)) is None or gate.accepts(te):
        return None
    return f"lightning-thunder {thunder} does not support TransformerEngine {te}: it accepts TE where {gate.describe()}"


def no_thunder(env: Environment) -> str | None:
    if env.versions.thunder is None:
        return "lightning-thunder is not installed"
    if env.thunder_import_error:
        return f"lightning-thunder {env.versions.thunder} fails to import: {env.thunder_import_error}"
    return None


def no_executor(env: Environment, kind: ExecutorKind) -> str | None:
    """Why this thunder has no executor of ``kind``: recorded where the probe looked for it
    (``teparity.stack.executors.absent``)."""
    return no_thunder(env) or env.executors[kind].missing_reason


def no_backward_sync(env: Environment) -> str | None:
    if reason := no_executor(env, "legacy"):
        return reason
    if not env.executors["legacy"].has_backward_sync:
        return (
            f"lightning-thunder {env.versions.thunder}'s legacy TE executor has no {BACKWARD_SYNC_SYMBOL} "
            f"(added {since.BACKWARD_SYNC_ADDED})"
        )
    if flag := env.executors["legacy"].backward_sync_gate_off:
        te = env.versions.transformer_engine
        te = f"TransformerEngine {te}" if te else "TransformerEngine absent"
        return (
            f"lightning-thunder {env.versions.thunder}'s legacy TE executor inserts {BACKWARD_SYNC_SYMBOL} only "
            f"if {flag}, which is false here ({te}); without it, it reorders the TE linears instead"
        )
    return None


def no_te(env: Environment) -> str | None:
    if env.versions.transformer_engine is None:
        return f"TransformerEngine is not installed; the FP8 tiers need it, on an FP8 GPU host: {te_install.for_torch(env.torch_cuda)}"
    if env.te_import_error:
        return f"TransformerEngine {env.versions.transformer_engine} fails to import: {env.te_import_error}"
    return None


def no_fp8_gpu(env: Environment) -> str | None:
    if not env.gpus:
        return "no CUDA GPU visible (FP8 needs sm_89+)"
    if not any(g.fp8 for g in env.gpus):
        seen = ", ".join(g.describe() for g in env.gpus)
        return f"no FP8-capable GPU (need sm_89+; found {seen})"
    return None


def no_fp8(env: Environment) -> str | None:
    """Why thunder + TE FP8 cannot run here (TE, GPU), or None."""
    return no_te(env) or no_fp8_gpu(env)


def too_few_gpus(env: Environment, count: int) -> str | None:
    if len(env.gpus) < count:
        return f"needs {count} GPUs, {len(env.gpus)} visible"
    return None


def no_input_grad_under_ddp(thunder: str | None) -> str | None:
    """Why thunder ``thunder``'s DDP transform cannot take an input that requires grad, or None.

    Before ``DDP_INPUT_GRAD_SINCE`` its gradient bucketing (``thunder/distributed/transforms/ddp.py``,
    ``optimize_allreduce_in_ddp_backward``) looks for an all-reduce behind every tensor the backward
    returns, the input's gradient too, and raises ``ValueError: <CollectionProxy ...> had an unexpected
    type`` in ``get_bsym_of_allreduce_of_grad``, whatever ``bucket_size_in_mb`` (docs/facts.md). There the
    ddp tier's inputs do not require grad; the known defect ``ddp-transform-rejects-input-grad`` covers
    the check that insists (``ddp-transform-matches-torch-ddp``).
    """
    if since.reached(thunder, since.DDP_INPUT_GRAD_SINCE):
        return None
    return (
        f"lightning-thunder {thunder}'s DDP transform raises on an input that requires grad (fixed in "
        f"{since.DDP_INPUT_GRAD_SINCE}): the inputs do not require grad and input gradients are not compared"
    )


def feature_absent(executor: ExecutorKind, thunder: str | None, *, recipe_changes: bool, compile_path: str,
                   cache: str | None = None) -> str | None:
    """Why this thunder cannot run a program variant at all (absent by design), or None."""
    if executor == "legacy" and recipe_changes:
        return ("the legacy TE executor takes its recipe once, at thunder.jit (te_fp8_recipe=...): a recipe change "
                "between steps is a new thunder.jit, not a change it can see")
    if compile_path == "thunderfx" and not since.reached(thunder, since.THUNDERFX_SINCE):
        return f"lightning-thunder {thunder} has no thunder.dynamo.thunderfx (first seen in {since.THUNDERFX_SINCE})"
    if cache == "symbolic values" and not since.reached(thunder, since.SYMBOLIC_SHAPES_SINCE):
        return (f"lightning-thunder {thunder}'s cache='symbolic values' makes no shape symbolic (every shape static, a "
                f"cache entry per shape as under the default cache; symbolic from {since.SYMBOLIC_SHAPES_SINCE})")
    return None


def no_8bit_inference(env: Environment) -> str | None:
    """Why thunder's 8-bit inference (``TEInference8BitTransform``) cannot run here, or None."""
    if reason := no_fp8(env):
        return reason
    if not since.reached(env.versions.thunder, since.TE_INFERENCE_8BIT_SINCE):
        return (f"lightning-thunder {env.versions.thunder} has no TEInference8BitTransform "
                f"(thunder/transforms/te_inference.py, from {since.TE_INFERENCE_8BIT_SINCE})")
    if not since.reached(env.versions.transformer_engine, since.TE_INFERENCE_8BIT_TE_SINCE):
        return (f"thunder's 8-bit inference takes TE's Float8Quantizer from TransformerEngine "
                f"{since.TE_INFERENCE_8BIT_TE_SINCE} on (installed {env.versions.transformer_engine})")
    return None


def recipe_declined(recipe_class: str, executor: ExecutorKind, env: Environment) -> str | None:
    """Why this executor / installed TE / GPU cannot run a recipe of class ``recipe_class``, or None."""
    if recipe_class == "DelayedScaling":
        return None
    te = build_version("transformer_engine")
    if recipe_class == "Float8CurrentScaling" and te is not None and not since.reached(te, since.CURRENT_SCALING_TE_SINCE):
        return f"Float8CurrentScaling needs TransformerEngine {since.CURRENT_SCALING_TE_SINCE}+ (installed {te})"
    if recipe_class == "Float8BlockScaling" and (reason := block_scaling_unsupported(env)):
        return reason
    if executor == "legacy" and recipe_class not in since.LEGACY_RECIPES:
        return (f"the legacy TE executor's API takes {' and '.join(since.LEGACY_RECIPES)} only (te_fp8_recipe; its "
                "_linear_checker asserts so)")
    # The functional executor takes the caller's autocast recipe: where it declines one, thunder runs the linear in
    # torch, a silent fallback the check reports (known upstream: functional-declines-current-scaling).
    return None


def block_scaling_unsupported(env: Environment) -> str | None:
    """Why TE's Float8BlockScaling cannot run here (TE's own rule, ``check_fp8_block_scaling_support``: compute
    capability 9.0+ and CUDA 12.9+; and a TE that defines it, read in its source without importing it), or None."""
    te = build_version("transformer_engine")
    if te is not None and not te_recipe_defined("Float8BlockScaling"):
        return f"TransformerEngine {te} has no Float8BlockScaling recipe"
    cuda = parse_version(env.torch_cuda or "")
    if cuda is None or cuda < since.BLOCK_SCALING_CUDA or not any(
            tuple(g.capability) >= since.BLOCK_SCALING_CAPABILITY for g in env.gpus):
        seen = ", ".join(g.describe() for g in env.gpus) or "no GPU"
        return (f"Float8BlockScaling needs compute capability {'.'.join(map(str, since.BLOCK_SCALING_CAPABILITY))}+ "
                f"and CUDA {since.BLOCK_SCALING_CUDA}+ (TE's check_fp8_block_scaling_support); here {seen}, torch "
                f"CUDA {env.torch_cuda}")
    return None


@functools.cache
def te_recipe_defined(name: str) -> bool:
    """Whether the installed TE's ``transformer_engine/common/recipe`` defines class ``name`` (read, not imported:
    importing TE in the gate's process would initialize CUDA before the ranks fork)."""
    import importlib.metadata

    try:
        files = importlib.metadata.files("transformer_engine") or []
    except importlib.metadata.PackageNotFoundError:
        return False
    sources = [f for f in files if str(f).replace("\\", "/").startswith("transformer_engine/common/recipe")
               and str(f).endswith(".py")]
    return any(f"class {name}" in f.read_text() for f in sources)


#: Set to 1 to run the fsdp tier on gloo ranks sharing one GPU anyway (to measure it again).
FSDP_ON_GLOO_VARIABLE = "TEPARITY_FSDP_ON_GLOO"
#: Measured on one H200 (docs/results/h200-te2.9.0-65ae0b1-features, fsdp-gloo.*): every
#: collective the tier needs ran on gloo with CUDA tensors, and still torch FSDP2 did not get through its first step.
FSDP2_GLOO_ONE_GPU = (
    "torch FSDP2 on gloo ranks sharing one GPU dies of SIGSEGV in its first step (over te.Linear in DTensor.full_tensor, "
    "around thunderfx in its all-gather custom op; torch 2.11.0+cu130, TE 2.9.0), although every collective it needs "
    f"runs there on CUDA tensors ({FSDP_ON_GLOO_VARIABLE}=1 takes FSDP2 anyway)"
)


def fsdp_backend_unfit(backend: str, gpus: int) -> str | None:
    """Why torch FSDP2 over ``te.Linear`` cannot be the fsdp tier's reference on this backend, or None: on gloo with
    a GPU, the crash seen there, unless ``FSDP_ON_GLOO_VARIABLE`` is 1 (the tier then takes torch DDP instead:
    ``teparity.inrank.strategies.thunder_fsdp``)."""
    if backend != "gloo" or not gpus or os.environ.get(FSDP_ON_GLOO_VARIABLE) == "1":
        return None
    return FSDP2_GLOO_ONE_GPU


def mutation_inapplicable(requires: str, env: Environment) -> str | None:
    """Why a mutation of the catalog (``teparity.mutations``) that ``requires`` this of the stack does not apply
    here, or None: the kill matrix's n/a."""
    if requires == "legacy-sync":
        return no_backward_sync(env)
    if requires == "legacy-te":
        return no_backward_sync(env) or no_fp8(env)
    if requires in ("functional-te", "functional-fp8-group", "functional-checkpointing"):
        if reason := no_executor(env, "functional") or no_fp8(env):
            return reason
        if requires == "functional-fp8-group" and not env.executors["functional"].honors_fp8_group:
            return (
                f"lightning-thunder {env.versions.thunder}'s functional executor already reduces over the "
                "default group (the strict xfail of ddp-fp8-group-per-rank): this regression needs a build "
                "that honours fp8_group"
            )
        if requires == "functional-checkpointing" and not since.reached(env.versions.thunder, since.CHECKPOINTING_TRANSFORM_SINCE):
            return (f"lightning-thunder {env.versions.thunder} has no _te_activation_checkpointing_transform "
                    f"(from {since.CHECKPOINTING_TRANSFORM_SINCE})")
        return None
    if requires == "ddp-transform":
        return _no_ddp_transform_to_mutate(env)
    if requires == "fsdp-transform":
        return no_thunder(env)
    if requires == "te-inference":
        return no_8bit_inference(env)
    if requires == "thunderfx":
        return no_thunder(env) or feature_absent(None, env.versions.thunder, recipe_changes=False, compile_path="thunderfx")
    return no_fp8(env)


def _no_ddp_transform_to_mutate(env: Environment) -> str | None:
    """Why the DDP-transform mutant does not apply: no ``DDPTransform`` to patch, or the check that must
    kill it is a known defect on this build (it raises before any gradient is reduced)."""
    if reason := no_thunder(env):
        return reason
    if not since.reached(env.versions.thunder, since.DDP_OF_JITTED_SINCE):
        return (f"lightning-thunder {env.versions.thunder} has no DDPTransform (thunder.distributed.transforms.ddp_v2, "
                f"from {since.DDP_OF_JITTED_SINCE})")
    return no_input_grad_under_ddp(env.versions.thunder)
