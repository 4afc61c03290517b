"""The signatures of defects that raise: predicates over the tracebacks a failure carries, whether thunder's side of
a case raised (``PartedFromEager`` with case errors and no number that differs), every rank raised in a check
(``RaisedOnTheRanks``), a rank raised or died outside a judge (``RanksFailed``) or thunder's own run raised
(``ThunderRunRaised``); ``_tracebacks_of_thunder`` reads the thunder side's tracebacks out of any of them. Every
signature here is bounded: nothing else may raise or differ."""

from __future__ import annotations

import re
from typing import Any

from teparity.judge.failures import (
    PartedFromEager,
    PartedFromEagerEvidence,
    RaisedOnTheRanks,
    RaisedOnTheRanksEvidence,
    ThunderRunRaised,
)
from teparity.known.defect import Signature
from teparity.launch.outcome import RanksFailed
from teparity.records import NOTHING_STASHED
from teparity.stack.environment import Environment


_NO_FP32_BIAS_ALGO = "Unable to find suitable cuBLAS GEMM algorithm"

#: What thunder.jit raises on a network of TE modules, by TE release: TE 2.9 traces, then its autocast exit meets the
#: trace's proxies in TE's global amax buffer (as does an eager TE step after it); TE 2.20 fails inside the trace.
_TE_MODULES_UNTRACEABLE = re.compile(
    r"expected Tensor as element \d+ in argument 0, but got TensorProxy|attribute fp8 of \w+ object out of sync|"
    r"'function' object has no attribute '__self__'|layernorm_fwd\(\): incompatible function arguments|"
    r"KeyError: thunder\.dtypes\.\w+$"
)


def _te_modules_untraceable(evidence: dict[str, Any], env: Environment) -> bool:
    """Every error of thunder's side (and of eager TE's step after it) is one of ``_TE_MODULES_UNTRACEABLE``."""
    errors = evidence.get("errors") or []
    return bool(errors) and all(_TE_MODULES_UNTRACEABLE.search(e["error"].splitlines()[0]) for e in errors)


def _fp32_bias_gemm(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        evidence["numeric_differences"] == 0
        and bool(errors)
        and all(
            e["side"] == "thunder" and e["case"].dtype == "float32" and e["case"].bias and _NO_FP32_BIAS_ALGO in e["error"]
            for e in errors
        )
    )


def _no_allreduce_behind_input_grad(evidence: RaisedOnTheRanksEvidence, env: Environment) -> bool:
    errors = evidence["errors"]
    return len(errors) == evidence["world_size"] and all(
        e["type"] == "builtins.ValueError"
        and "CollectionProxy" in e["message"] and "had an unexpected type" in e["message"]
        and {"optimize_allreduce_in_ddp_backward", "get_bsym_of_allreduce_of_grad"} <= set(e["functions"])
        for e in errors
    )


_UNPACK_AT_TE_LINEAR = re.compile(
    r"= te_linear_\d+\(.*\n(?:.*\n){0,3}?.*ValueError: (?:too many values to unpack \(expected \d+\)|"
    r"not enough values to unpack \(expected \d+, got \d+\))"
)


def _tracebacks_of_thunder(evidence: dict[str, Any]) -> list[str] | None:
    """The thunder side's tracebacks in any of the three shapes the failure takes, or None where a failure
    of another kind is among them (an eager case error, a rank that hung or died)."""
    if "case_errors" in evidence:  # PartedFromEager: cases that raised on a side, and no number that differs
        errors = evidence["case_errors"]
        only_thunder = errors and all(e["side"] == "thunder" for e in errors) and not evidence["numeric_differences"]
        return [e["error"] for e in errors] if only_thunder else None
    if "failures" in evidence:  # RanksFailed: ranks that raised outside a judge
        failures = evidence["failures"]
        return [f["detail"] for f in failures] if failures and all(f["kind"] == "raised" for f in failures) else None
    return [e["error"] for e in evidence.get("errors") or []] or None  # ThunderRunRaised


def _legacy_unpack_at_te_linear(evidence: dict[str, Any], env: Environment) -> bool:
    """Every thunder-side error is a ValueError unpacking a te_linear_N call's result (numbers differ by build)."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(_UNPACK_AT_TE_LINEAR.search(text) for text in tracebacks)


def _no_bucket_for_the_input_grad(evidence: dict[str, Any], env: Environment) -> bool:
    """Every rank raised thunder's 'Invalid index=0' in its FSDP bucketing: the transform check's ranks
    (``RaisedOnTheRanks``), or the fsdp tier's (``RanksFailed``, every failing rank raised it)."""
    if "failures" in evidence:
        failures = evidence["failures"]
        return bool(failures) and all(
            f["kind"] == "raised" and "RuntimeError: Invalid index=0, " in f["detail"]
            and "create_map_from_unsharded_grad_to_bucket" in f["detail"] for f in failures
        )
    errors = evidence["errors"]
    return len(errors) == evidence["world_size"] and all(
        e["type"] == "builtins.RuntimeError" and e["message"].startswith("Invalid index=0, ")
        and {"_apply_bucketing_to_backward_reduce_scatter", "create_map_from_unsharded_grad_to_bucket"} <= set(e["functions"])
        for e in errors
    )


def _recompute_reads_an_unbound_forward_tensor(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        "compiled with thunderfx" in evidence["variant"] and "activation checkpointing" in evidence["variant"]
        and not evidence["numeric_differences"] and bool(errors)
        and all(
            e["side"] == "thunder" and e["error"].startswith("UnboundLocalError: cannot access local variable")
            and "in backward_fn" in e["error"]
            for e in errors
        )
        and any("te_functional_linear_bwd(" in e["error"] for e in errors)
    )


def _gelu_reads_an_unbound_forward_input(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        "activation checkpointing" in evidence["variant"] and "compiled with thunderfx" not in evidence["variant"]
        and not evidence["numeric_differences"] and bool(errors)
        and all(
            e["side"] == "thunder" and e["error"].startswith("UnboundLocalError: cannot access local variable")
            and "in backward_fn" in e["error"] and e["case"].activation == "gelu"
            for e in errors
        )
    )


def _no_sync_stashed_nothing(evidence: dict[str, Any], env: Environment) -> bool:
    """Every failing rank raised the harness's check that thunder's FSDP no-sync backward stashed a gradient, and
    nothing else failed."""
    failures = evidence.get("failures") or []
    return bool(failures) and all(f["kind"] == "raised" and f"AssertionError: {NOTHING_STASHED}" in f["detail"] for f in failures)


def _no_sync_stash_lost_a_producer(evidence: dict[str, Any], env: Environment) -> bool:
    """Every failing rank raised KeyError on a proxy name while thunder prepared the FSDP no-sync backward for execution
    (``transform_for_execution`` under ``split_forward_backward``), looking the proxy up in ``dce``'s producers or the
    trace interpreter's ``read``, and nothing else failed."""
    failures = evidence.get("failures") or []
    return bool(failures) and all(
        f["kind"] == "raised" and re.search(r"KeyError: 't\d+'", f["detail"]) is not None
        and (" in dce" in f["detail"] or " in read" in f["detail"]) and " in transform_for_execution" in f["detail"]
        and " in split_forward_backward" in f["detail"] for f in failures
    )


_FP8_RECIPE_ASSERTED = "assert fp8_recipe.mxfp8()"


def _checker_asserts_the_recipe(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Every case raised on the thunder side the AssertionError of the functional checker's ``check_valid_fp8_shapes``
    (a recipe neither delayed nor MXFP8), and no number differs."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        "AssertionError" in text and _FP8_RECIPE_ASSERTED in text and "check_valid_fp8_shapes" in text for text in tracebacks
    )


def _sdpa_params_of_six(evidence: dict[str, Any], env: Environment) -> bool:
    """Every thunder-side error is torch refusing thunder's ``_SDPAParams(...)`` call, and nothing else failed."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        "incompatible constructor arguments" in text and "_SDPAParams" in text for text in tracebacks
    )


def _torchcompile_cat_segfault(evidence: dict[str, Any], env: Environment) -> bool:
    """Every failing rank died of SIGSEGV in thunder's ``order_proxies``, under the ``torchcompile_cat`` fusion pass."""
    failures = evidence.get("failures") or []
    return bool(failures) and all(
        f["kind"] == "signaled" and "Fatal Python error: Segmentation fault" in f["detail"]
        and " in order_proxies" in f["detail"] and "torch_compile.py" in f["detail"] and " in fusion_pass" in f["detail"]
        for f in failures
    )


#: What thunder.jit raises, by build, while it traces a ``torch.utils.checkpoint`` region it cannot follow.
_CHECKPOINT_NOT_TRACED = (
    "SequenceWrapperMethods.__getitem__() missing 1 required positional argument: 'idx'",
    "requires_grad=True is not yet supported within thunder.jit",
    "must be Tensor, not TensorProxy",
)


def _checkpoint_not_traced(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Under activation checkpointing, every case raised on the thunder side while tracing the checkpointed region,
    and no number differs."""
    errors = evidence["case_errors"]
    return (
        "activation checkpointing" in evidence["variant"] and not evidence["numeric_differences"] and bool(errors)
        and all(e["side"] == "thunder" and any(said in e["error"] for said in _CHECKPOINT_NOT_TRACED) for e in errors)
    )


_BLOCK_SCALING_QUANTIZERS = "assert self.num_quantizers % 3 == 0"


def _block_scaling_quantizer_count(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Every case raised on the thunder side TE's AssertionError of Float8BlockScaling's ``make_quantizers`` (a
    recipe state of a number of quantizers not a multiple of 3), and no number differs."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        "AssertionError" in text and _BLOCK_SCALING_QUANTIZERS in text and "make_quantizers" in text for text in tracebacks
    )


def _symbolic_values_cannot_unpack(evidence: PartedFromEagerEvidence, env: Environment) -> bool:
    """Every case raised on the thunder side thunder's NotImplementedError unpacking an object from a provenance
    record (under ``cache="symbolic values"``), and no number differs."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return "symbolic values" in evidence["variant"] and bool(tracebacks) and all(
        "NotImplementedError" in text and _UNPACKING_FROM_PROVENANCE in text for text in tracebacks
    )


_UNPACKING_FROM_PROVENANCE = "Exception occured unpacking object from ProvenanceRecord"


#: What thunder raises, by build, interpreting torch 2.12's fx code generation, and the functions its traceback runs
#: through: 0.2.5 and later its own len() of a keys view in torch.fx's ``delete_unused_values``; 0.2.1 .. 0.2.4
#: torch.fx's check on the Graph's node list, met inside thunder's interpreter (an InterpreterError of thunder's jit).
_FX_CODEGEN_RAISES = {
    "builtins.TypeError": ("object of type 'MappingKeysView' has no len()", ("_python_code", "delete_unused_values")),
    "thunder.core.interpreter.InterpreterError": ("AssertionError: attribute nodes of Graph object out of sync",
                                                  ("thunder_general_jit",)),
}


def _fx_codegen_not_interpreted(evidence: dict[str, Any], env: Environment) -> bool:
    """Every rank raised (``RaisedOnTheRanks``), or every thunder-side error is (a case's, a rank's), one of
    ``_FX_CODEGEN_RAISES`` inside torch.fx's code generation, and nothing else failed."""
    if "world_size" in evidence:
        errors = evidence["errors"]
        return len(errors) == evidence["world_size"] and all(
            e["type"] in _FX_CODEGEN_RAISES and _FX_CODEGEN_RAISES[e["type"]][0] in e["message"]
            and set(_FX_CODEGEN_RAISES[e["type"]][1]) <= set(e["functions"])
            for e in errors
        )
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        any(said in text and all(f" in {function}\n" in text for function in functions)
            for said, functions in _FX_CODEGEN_RAISES.values())
        for text in tracebacks
    )


#: What thunder raises, by build, running the TE program under its CUDA graph transform, and where: 0.2.3 on (and the
#: legacy executor from 0.2.5) the transform's assertion of a fixed backward trace layout; the legacy executor of 0.2.4
#: TE's ``restore_from_saved`` given no saved tensors.
_CUDA_GRAPH_RAISES = (
    ("AssertionError", "in transform_trace_post_optimization", '.sym.name == "unpack_sequence"'),
    ("TypeError: 'NoneType' object is not iterable", "in restore_from_saved", "restore_from_saved(ctx.tensor_objects"),
)


def _cuda_graph_backward_layout(evidence: dict[str, Any], env: Environment) -> bool:
    """Under thunder's CUDA graph transform, every thunder-side error is one of ``_CUDA_GRAPH_RAISES``, and nothing
    else failed."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return "CUDA graph transform" in evidence.get("variant", "") and bool(tracebacks) and all(
        any(all(said in text for said in raised) for raised in _CUDA_GRAPH_RAISES) for text in tracebacks
    )


_RECIPE_IN_COMPILED_REGION = "Creating Recipe objects inside compiled regions is not supported"


def _recipe_in_compiled_region(evidence: dict[str, Any], env: Environment) -> bool:
    """Every thunder-side error is TE's AssertionError that ``get_default_fp8_recipe`` runs inside a compiled region,
    and nothing else failed."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(
        "AssertionError" in text and _RECIPE_IN_COMPILED_REGION in text and "get_default_fp8_recipe" in text for text in tracebacks
    )


# -- the signatures -------------------------------------------------------------------------------

CUDA_GRAPH_BACKWARD_LAYOUT = Signature(
    PartedFromEager,
    _cuda_graph_backward_layout,
    "under thunder's CUDA graph transform, every thunder-side case error is the transform's AssertionError that the "
        "backward trace's tenth symbol unpacks saved_for_backward (the legacy executor of 0.2.4: TypeError "
        "'NoneType' object is not iterable in TE's restore_from_saved), and no number differs",
    bounded=True,
)
RECIPE_IN_COMPILED_REGION = Signature(
    (PartedFromEager, RanksFailed),
    _recipe_in_compiled_region,
    f"every thunder-side error (a case's or a rank's) is TE's AssertionError '{_RECIPE_IN_COMPILED_REGION}' from "
        "get_default_fp8_recipe, and nothing else failed",
    bounded=True,
)

FP32_BIAS_GEMM = Signature(
    PartedFromEager,
    _fp32_bias_gemm,
    f"every difference is a thunder-side case with fp32 parameters and a bias raising '{_NO_FP32_BIAS_ALGO}'",
    bounded=True,
)
NO_ALLREDUCE_BEHIND_INPUT_GRAD = Signature(
    RaisedOnTheRanks,
    _no_allreduce_behind_input_grad,
    "every rank raised ValueError '<CollectionProxy(...)> had an unexpected type' from "
        "get_bsym_of_allreduce_of_grad, called by optimize_allreduce_in_ddp_backward",
    bounded=True,
)
LEGACY_UNPACK_AT_TE_LINEAR = Signature(
    (PartedFromEager, RanksFailed, ThunderRunRaised),
    _legacy_unpack_at_te_linear,
    "every thunder-side error (a case's, a rank's, or the run's) is a ValueError 'too many values to "
        "unpack' or 'not enough values to unpack' at a te_linear_N call of the computation trace, and nothing "
        "else failed",
    bounded=True,
)
NO_BUCKET_FOR_THE_INPUT_GRAD = Signature(
    (RaisedOnTheRanks, RanksFailed),
    _no_bucket_for_the_input_grad,
    "every rank raised RuntimeError 'Invalid index=0, ...' from create_map_from_unsharded_grad_to_bucket, "
        "called by _apply_bucketing_to_backward_reduce_scatter",
    bounded=True,
)
RECOMPUTE_READS_AN_UNBOUND_FORWARD_TENSOR = Signature(
    PartedFromEager,
    _recompute_reads_an_unbound_forward_tensor,
    "under activation checkpointing compiled with thunderfx, every case error is the thunder side's "
        "UnboundLocalError in backward_fn, at least one of them at a te_functional_linear_bwd call, and no number differs",
    bounded=True,
)
CHECKPOINTED_GELU_READS_AN_UNBOUND_INPUT = Signature(
    PartedFromEager,
    _gelu_reads_an_unbound_forward_input,
    "under activation checkpointing compiled with thunder.jit, every case error is the thunder side's "
        "UnboundLocalError in backward_fn, each in a case with GELUs, and no number differs",
    bounded=True,
)
FSDP_NO_SYNC_STASHED_NOTHING = Signature(
    RanksFailed,
    _no_sync_stashed_nothing,
    "every failing rank raised AssertionError 'thunder's FSDP no-sync backward stashed no unsharded gradient' (the "
    "harness's check before no_sync reduces), and nothing else failed",
    bounded=True,
)
FSDP_NO_SYNC_STASH_LOST_A_PRODUCER = Signature(
    RanksFailed,
    _no_sync_stash_lost_a_producer,
    "every failing rank raised KeyError on a proxy name ('t43') in thunder's dce or its trace interpreter's read, under "
    "transform_for_execution in split_forward_backward, and nothing else failed",
    bounded=True,
)
CHECKER_ASSERTS_THE_RECIPE = Signature(
    PartedFromEager,
    _checker_asserts_the_recipe,
    f"every case raised on the thunder side AssertionError '{_FP8_RECIPE_ASSERTED}' in the functional checker's "
    "check_valid_fp8_shapes, and no number differs",
    bounded=True,
)
SDPA_PARAMS_OF_SIX = Signature(
    (PartedFromEager, RanksFailed, ThunderRunRaised),
    _sdpa_params_of_six,
    "every thunder-side error (a case's, a rank's, or the run's) is TypeError 'incompatible constructor arguments' "
    "for torch._C._SDPAParams, and nothing else failed",
    bounded=True,
)
TORCHCOMPILE_CAT_SEGFAULT = Signature(
    RanksFailed,
    _torchcompile_cat_segfault,
    "every failing rank was killed by SIGSEGV with its stack in thunder's order_proxies (core/transform_common.py) "
    "under the torchcompile_cat executor's fusion_pass (executors/torch_compile.py)",
    bounded=True,
)
CHECKPOINT_NOT_TRACED = Signature(
    PartedFromEager,
    _checkpoint_not_traced,
    "under activation checkpointing every case raised on the thunder side, each with one of thunder.jit's errors on "
    "a checkpointed region (the interpreter's SequenceWrapperMethods 'idx', requires_grad=True not supported, a "
    "TensorProxy passed to linear), and no number differs",
    bounded=True,
)
BLOCK_SCALING_QUANTIZER_COUNT = Signature(
    PartedFromEager,
    _block_scaling_quantizer_count,
    f"every case raised on the thunder side TE's AssertionError '{_BLOCK_SCALING_QUANTIZERS}' in make_quantizers, and "
    "no number differs",
    bounded=True,
)
SYMBOLIC_VALUES_CANNOT_UNPACK = Signature(
    PartedFromEager,
    _symbolic_values_cannot_unpack,
    f"under cache='symbolic values' every case raised on the thunder side NotImplementedError '{_UNPACKING_FROM_PROVENANCE}', "
    "and no number differs",
    bounded=True,
)
FX_CODEGEN_NOT_INTERPRETED = Signature(
    (RaisedOnTheRanks, PartedFromEager, RanksFailed),
    _fx_codegen_not_interpreted,
    "every rank, or every thunder-side error, raised inside torch.fx's code generation: TypeError \"object of type "
    "'MappingKeysView' has no len()\" in _python_code's delete_unused_values, or thunder's InterpreterError of "
    "AssertionError 'attribute nodes of Graph object out of sync' in thunder_general_jit; nothing else failed",
    bounded=True,
)
TE_MODULES_UNTRACEABLE = Signature(
    ThunderRunRaised,
    _te_modules_untraceable,
    "thunder.jit of a network of TE modules raised one of: TypeError 'expected Tensor as element N in argument 0, but "
    "got TensorProxy' at TE's autocast exit (and eager TE's step after it raised the same), AssertionError 'attribute "
    "fp8 of <module> object out of sync', AttributeError \"'function' object has no attribute '__self__'\", TypeError "
    "'layernorm_fwd(): incompatible function arguments', KeyError of a thunder dtype (TE 2.12); nothing else raised",
    bounded=True,
)
