"""The version facts the gate relies on, each with where it was read or seen: the first build (or release)
that has a thing, in one place. A fact is a ``packaging`` ``Version``; compare with ``reached``."""

from __future__ import annotations

from packaging.version import Version

from teparity.stack.versions import parse_version

#: thunder PR #873 ("DDP as a transform", 2024-08-04) made ``ddp(jit(module))`` the form; builds before it
#: only take ``jit(ddp(module))`` (``ddp(jit(...))`` fails there with "None had an unexpected type"). The
#: first weekly build that takes it is 0.2.0.dev20240811: on dev20240804 ``ddp(jit(module))`` still fails
#: ("None had an unexpected type <class 'NoneType'>. Supported types are ProcessGroup") and
#: ``jit(ddp(module))`` runs (seen on the CPU: docs/results/cpu-ddp-transform-2024/). It is also the first
#: build with ``DDPTransform`` (``thunder.distributed.transforms.ddp_v2``).
DDP_OF_JITTED_SINCE = Version("0.2.0.dev20240811")
#: The first build whose DDP transform takes an input that requires grad: the last that raises is
#: 0.2.4.dev20250601 (bisected on the CPU, docs/results/cpu-ddp-transform-2024/bisect.jsonl).
DDP_INPUT_GRAD_SINCE = Version("0.2.4.dev20250608")
#: The first build seen with ``thunder.dynamo.thunderfx`` (0.2.0.dev20241201 has none; read in the wheels).
THUNDERFX_SINCE = Version("0.2.0.dev20241229")
#: ``cache="symbolic values"`` makes a tensor's shape symbolic: 0.2.1's ``tensorproxy`` does; 0.2.0.dev20240901's keeps
#: every shape static ("dynamic shape ... not yet enabled"), so a new shape is a new cache entry there, as under the
#: default cache (read in the wheels; run on the CPU: docs/results/cpu-bisect-symbolic-values). Builds between, unread.
SYMBOLIC_SHAPES_SINCE = Version("0.2.1")
#: The first release whose functional executor has ``_te_activation_checkpointing_transform`` (read in the
#: wheels: 0.2.5.dev20250720 has none, 0.2.5 has it).
CHECKPOINTING_TRANSFORM_SINCE = Version("0.2.5")
#: The functional TE executor's first release (``transformer_engine_v2ex``, opt-in).
FUNCTIONAL_EXECUTOR_SINCE = Version("0.2.3")
#: The build that removed the legacy TE executor (thunder PR #2762).
LEGACY_EXECUTOR_REMOVED_IN = Version("0.2.7.dev20251130")
#: The legacy executor's backward FP8 sync symbol: added 2024-05-13 by thunder PR #379.
BACKWARD_SYNC_ADDED = "2024-05-13, thunder PR #379"
#: The first build with a gradient rule for SiLU (thunder PR #2624, read in the wheels: not in 0.2.6.dev20251012); before
#: it thunder differentiates ``a * reciprocal(1 + exp(-a))`` op by op, a few float32 ulps from torch's silu kernels.
SILU_GRAD_RULE_SINCE = Version("0.2.6.dev20251019")
#: The first build whose rematerialization recomputes a checkpointed region's GELUs from the recomputed input (jit: all
#: but the last's forward terms; thunderfx: all of it). Before it, jit and thunderfx keep every region GELU's cdf from
#: the forward and recompute its output as ``z_r * Phi(z_f)`` (read on the CPU in the backward traces: 0.2.4 ..
#: 0.2.5.dev20250629 keep, 0.2.5.dev20250706 .. 0.2.6 recompute; docs/results/cpu-gelu-remat).
GELU_RECOMPUTED_SINCE = Version("0.2.5.dev20250706")
#: ``Float8CurrentScaling``'s first TransformerEngine release.
CURRENT_SCALING_TE_SINCE = Version("2.2")
#: thunder's 8-bit inference (``thunder/transforms/te_inference.py``, ``TEInference8BitTransform``): in 0.2.6 and the
#: 0.2.7 nightlies, not in 0.2.5 (the wheels read); it takes TE's ``Float8Quantizer`` from TE 2.9 on (its own test's skip).
TE_INFERENCE_8BIT_SINCE = Version("0.2.6")
TE_INFERENCE_8BIT_TE_SINCE = Version("2.9")
#: TE's rule for ``Float8BlockScaling`` (``check_fp8_block_scaling_support``): compute capability and torch's CUDA.
BLOCK_SCALING_CAPABILITY = (9, 0)
BLOCK_SCALING_CUDA = Version("12.9")
#: The recipe classes the legacy TE executor's API takes (``te_fp8_recipe``; its ``_linear_checker`` asserts so).
LEGACY_RECIPES = ("DelayedScaling", "MXFP8BlockScaling")
#: FP8 GEMMs need compute capability 8.9 (Ada) or newer.
FP8_MIN_CAPABILITY = (8, 9)


#: The facts of the installed thunder build that rank code reads (``installed_thunder_reached``), on either side: a
#: reference side is reused across thunder builds only where each reads the same (``teparity.gate.references``).
RANK_READS = (DDP_INPUT_GRAD_SINCE, SILU_GRAD_RULE_SINCE, GELU_RECOMPUTED_SINCE)


def installed_thunder_reached(since: Version) -> bool:
    """In a rank: whether the installed thunder build is ``since`` or newer, for a fact of ``RANK_READS`` only (any
    other would be a thunder fact that a reused reference ignores)."""
    if since not in RANK_READS:
        raise ValueError(f"rank code reads {since} of thunder: add it to teparity.stack.since.RANK_READS, the facts a "
                         "reference's key holds")
    from teparity.stack.versions import build_version

    return reached(build_version("lightning-thunder"), since)


def reached(version: str | None, since: Version) -> bool:
    """Whether ``version`` is ``since`` or newer; an unparsable or absent version counts as reached (a local
    build of the newest source)."""
    parsed = parse_version(version or "")
    return parsed is None or parsed >= since
