"""What a parity pair is asked to run, and what each side returns: plain data.

The judges (``teparity.judge``) read these without importing the rank code (``teparity.inrank``).
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable
from typing import Any, Literal

from teparity.stack.executors import ExecutorKind
from teparity.strategies import STRATEGIES, Strategy
from teparity.trace_summary import TraceSummary

Side = Literal["eager", "thunder"]
#: FP8 scaling state of one step, normalized (``teparity.inrank.fp8state`` reads it): linear name ->
#: tensor role ("input", "weight", "grad_output") -> {"amax_history": [L], "scale": []} on the CPU.
Snapshot = dict[str, dict[str, dict[str, Any]]]
#: How TE updates delayed-scaling amax histories and scales: "fused" is TE's default (one CUDA kernel
#: for all tensors), "python" is TE's ``_amax_and_scale_update`` (``NVTE_UNFUSED_FP8_UPDATE=1``, read
#: by TE at every update), the path thunder's functional executor always takes.
ScaleUpdate = Literal["fused", "python"]


def reference_update(executor: str) -> ScaleUpdate:
    """The scale update that does ``executor``'s arithmetic: TE's fused kernel for the legacy executor (it runs TE's
    modules), TE's Python update for the functional one (the eager reference runs on it: ``teparity.judge.parity``)."""
    return "python" if executor == "functional" else "fused"


#: The eager models of known upstream defects (``PairSpec.model``; built by ``teparity.inrank.defect_models``): every
#: linear run by torch on the parameters; one FP8 state per thunder cache entry (the micro-batches without the
#: gradient all-reduce and the one with it); a fresh FP8 state whenever the recipe object changes; TE quantizing bf16
#: copies of fp32 input and parameters (torch.autocast); the checkpointed linears that thunder recomputes recomputed
#: in the backward under FP8, recording their amaxes again.
TORCH_LINEARS = "torch-linears"
STATE_PER_CACHE_ENTRY = "state-per-cache-entry"
FRESH_STATE_PER_RECIPE_OBJECT = "fresh-state-per-recipe-object"
BF16_COPIES = "bf16-copies"
RECOMPUTED_UNDER_FP8 = "recomputed-under-fp8"
#: Further eager models: the checkpoint a resumed run loads without TE's FP8 state (``_extra_state``); each call of a
#: linear called twice in one forward with an FP8 state of its own; eager TE whose delayed state, made anew at a
#: recipe type change, joins TE's global update.
RESUMED_WITHOUT_FP8_STATE = "resumed-without-fp8-state"
STATE_PER_CALL = "state-per-call"
STATE_REJOINS_UPDATE = "state-rejoins-update"
#: What a rank raises where thunder's FSDP no-sync backward left no gradient for ``no_sync`` to reduce.
NOTHING_STASHED = "thunder's FSDP no-sync backward stashed no unsharded gradient (_thunder_fsdp_unsharded_grad)"
EAGER_MODELS = (TORCH_LINEARS, STATE_PER_CACHE_ENTRY, FRESH_STATE_PER_RECIPE_OBJECT, BF16_COPIES, RECOMPUTED_UNDER_FP8,
                RESUMED_WITHOUT_FP8_STATE, STATE_PER_CALL, STATE_REJOINS_UPDATE)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """A network the tests train (``ARCHITECTURES``): how the rank builds it, what it computes beside its linears, and
    how a case of it is named. Its TE linears are its ``nn.Linear`` modules at any depth (``inrank.networks.linear_names``)."""

    name: str
    #: Its builder in the rank code, ``teparity.inrank.networks.<builder>(case.sizes, seed=, device=, dtype=, **fields)``.
    builder: str
    #: The ``Case`` fields the builder takes besides sizes and seed.
    case_fields: tuple[str, ...] = ()
    #: What it computes beside its linears that thunder decomposes where eager torch runs a fused kernel, so the sides
    #: round apart beyond an activation (its own, wider rules: ``judge.tolerances``); None: nothing.
    decompositions: str | None = None
    #: Its cases' label: before the sizes, and whether bias and activation are part of it.
    label_prefix: str = ""
    #: The input's dtype where the network casts it to its own first (None: the case's dtype).
    input_dtype: str | None = None
    #: Calls of its linears per forward beyond one each (a linear called twice): thunder's trace holds a TE linear per call.
    repeated_calls: int = 0

    def linear_calls(self, linears: int) -> int:
        """TE linears of a forward trace where TE holds each of its ``linears`` linears at every call."""
        return linears + self.repeated_calls

    def label(self, case: Case) -> str:
        shape = "x".join(map(str, (*case.lead_shape, case.sizes[0])))
        sizes = "-".join(map(str, case.sizes))
        if self.label_prefix:
            return f"{self.label_prefix}-{sizes}/in{shape}/{case.dtype}"
        bias = "bias" if case.bias else "nobias"
        return f"{sizes}/{bias}/{case.activation or 'linear-only'}/in{shape}/{case.dtype}"


#: Every architecture by name (``Case.architecture``).
ARCHITECTURES: dict[str, Architecture] = {
    arch.name: arch for arch in (
        Architecture("mlp", "plain_mlp", case_fields=("bias", "activation")),
        Architecture("llama", "llama_block", label_prefix="llama-block", decompositions=(
            "the llama block's RMSNorm, rotary, SDPA and SiLU are thunder's decompositions against torch's kernels")),
        Architecture("adapter", "adapter_mlp", label_prefix="frozen-base-adapter", input_dtype="float32"),
        Architecture("shared", "shared_linear_mlp", label_prefix="linear-called-twice", repeated_calls=1),
        Architecture("fp8-off-ends", "fp8_off_ends_mlp", label_prefix="fp8-off-ends"),
    )
}


@dataclasses.dataclass(frozen=True)
class Case:
    """A network and its input shape. Feature sizes and the flattened leading size are multiples of 16."""

    sizes: tuple[int, ...] = (32, 64, 16)
    bias: bool = True
    #: Input shape without the feature dimension: (16,) is a 2-D input, (2, 8) a 3-D one.
    lead_shape: tuple[int, ...] = (16,)
    dtype: str = "float32"
    seed: int = 0
    #: "gelu" between linears, or None (linears only: every tensor TE sees is then bitwise equal on
    #: both sides, so the FP8 state can be compared exactly).
    activation: str | None = "gelu"
    #: Its architecture's name in ``ARCHITECTURES``: "mlp" (``networks.plain_mlp``), "llama" (``networks.llama_block``:
    #: sizes are (width, MLP width, width), lead_shape (batch, sequence)), "adapter" (``networks.adapter_mlp``),
    #: "shared" (``networks.shared_linear_mlp``) or "fp8-off-ends" (``networks.fp8_off_ends_mlp``); bias and activation
    #: apply to "mlp" only.
    architecture: str = "mlp"

    @property
    def arch(self) -> Architecture:
        return ARCHITECTURES[self.architecture]

    def label(self) -> str:
        return self.arch.label(self)


def checkpoint_recomputes(case: Case) -> tuple[int, int]:
    """How many forward linears the backward may recompute under ``networks.CheckpointedMLP``: at least
    the region's linears whose output the region consumes (by a GELU, or the next linear: all of them
    with GELUs, all but the last without; thunder.jit recomputes exactly those, seen on the CPU with
    thunder 0.2.6 and on the H200), at most every linear of the region (thunderfx recomputes the
    region's last linear too: H200, docs/results/h200-te2.9.0-65ae0b1-features/)."""
    region = len(case.sizes) - 2
    return (region if case.activation else max(0, region - 1)), region


#: A step's FP8, as a training loop writes it, by mode: (what eager TE runs, what the thunder side runs) under
#: ``te.autocast`` with the step's recipe ("on"), ``te.autocast(enabled=False)`` ("off") or no TE autocast ("none").
#: "none" holds thunder to what its TE executors say of themselves: without an autocast they run FP8 with the default
#: recipe (the functional one reads ``FP8GlobalStateManager.get_fp8_recipe()``, "the default recipe for the platform"
#: outside an autocast: thunder/executors/transformer_engineex_impl.py ``TERecipe.__call__``; the legacy one wraps its
#: program in its own ``fp8_autocast``), so eager TE runs that step under ``te.autocast`` with the recipe.
FP8_MODES: dict[str, tuple[str, str]] = {"on": ("on", "on"), "off": ("off", "off"), "none": ("on", "none")}

#: What a defect model runs where the caller turned FP8 off (``PairSpec.fp8_where_off``): "on" (FP8 as if it were on:
#: the functional executor never asks TE whether FP8 is enabled) or "on-without-forward-update" (FP8 inside the
#: caller's disabled autocast, whose exit updates no forward state: the legacy executor's own autocast nested in it).
FP8_WHERE_OFF = ("on", "on-without-forward-update")

_SAYS = "says"


def _feature(default: Any, says: Callable[[Any], str | None]) -> Any:
    """A field of the thunder side's program variant, with what it says in a message where it is not plain
    training under ``thunder.jit`` (None: nothing to say)."""
    return dataclasses.field(default=default, metadata={_SAYS: says})


@dataclasses.dataclass(frozen=True)
class PairSpec:
    """What both sides of a parity pair run: eager TE (``run_eager``) and thunder + ``executor``
    (``run_thunder``)."""

    executor: ExecutorKind
    recipe_id: str
    cases: tuple[Case, ...]
    steps: int = 3
    micro_batches: int = 1
    #: How the ranks train (``teparity.strategies.STRATEGIES``): one rank, thunder ddp or fsdp, torch DDP or FSDP2 around
    #: thunderfx. Its world size, skip reason and options come from there.
    strategy: str = "one-rank"
    #: Ranks per ``fp8_autocast(fp8_group=...)``: None is TE's default (the world), k is consecutive
    #: blocks of k ranks (1: each rank alone), the group an amax reduction must stay within.
    fp8_group_size: int | None = None
    lr: float = 0.05
    #: The strategy's sharding (``thunder_api.FSDP_SHARDING``: thunder fsdp's ``sharding_strategy``, FSDP2's
    #: ``reshard_after_forward``), where it shards; else None.
    sharding: str | None = None
    #: thunder fsdp's ``bucketing_strategy`` by name (``"NONE"``, ``"LAYER"``, ``"BLOCK"``); None is its default.
    bucketing: str | None = None
    #: The eager reference of a sharding strategy (``strategies.REFERENCES``: ``"fsdp2"`` or ``"ddp"``); None: the one
    #: that runs on the session's backend (``Strategy.reference``, filled in by ``gate.pairs.Pairs.run``).
    reference: str | None = None
    #: The thunder side's layers before the last linear under ``torch.utils.checkpoint`` (non-reentrant);
    #: eager TE runs the network without it, the numbers checkpointing must not change.
    checkpoint: bool = _feature(False, lambda on: "activation checkpointing of every layer but the last" if on else None)
    #: How the thunder side is compiled: "jit" (``thunder.jit``) or "thunderfx" (``thunder.dynamo.thunderfx``:
    #: torch.compile with thunder as its backend); None: its strategy's (``Strategy.compile_path``), else "jit".
    compile_path: str = _feature(None, lambda path: f"compiled with {path}" if path != "jit" else None)
    #: Recipe ids used in turn, one per step (cycled); empty: ``recipe_id`` at every step. Each id's
    #: recipe object is built once per side, so a later step goes back to the same object.
    recipe_ids_by_step: tuple[str, ...] = _feature((), lambda ids: f"recipes in turn by step {list(ids)}" if ids else None)
    #: A new recipe object (equal settings) at every step, as a loop that builds its recipe inline does.
    new_recipe_each_step: bool = _feature(False, lambda on: "a new recipe object each step" if on else None)
    #: False: forward passes under ``torch.no_grad`` only (inference), no backward and no optimizer step.
    train: bool = _feature(True, lambda on: None if on else "no-grad forward passes only")
    #: ``torch.autocast`` around the forward with this dtype ("bfloat16"), on both sides.
    torch_autocast: str | None = _feature(None, lambda dtype: f"torch.autocast({dtype})" if dtype else None)
    #: Resume from a checkpoint after ``steps // 2`` steps: ``state_dict()`` of the side's program loaded into a fresh
    #: network, then "thunder" (compiled again: the thunder side; eager TE resumes in eager TE) or "eager" (the thunder
    #: side's checkpoint loaded into eager TE); None: no checkpoint.
    resume_into: str | None = _feature(None, lambda into: f"resumed from a checkpoint into {into} after half the steps"
                                       if into else None)
    #: Input shapes (without the feature dimension) by step, cycled; empty: the case's ``lead_shape`` at every step.
    lead_shapes_by_step: tuple[tuple[int, ...], ...] = _feature((), lambda shapes: f"input shapes by step {list(shapes)}"
                                                               if shapes else None)
    #: How each step's forward meets FP8 (``FP8_MODES``), by step (cycled); empty: "on" at every step.
    fp8_by_step: tuple[str, ...] = _feature((), lambda modes: f"FP8 by step {list(modes)}" if modes else None)
    #: Steps that run an evaluation forward: grad enabled, no backward, no optimizer step.
    eval_steps: tuple[int, ...] = _feature((), lambda steps: f"evaluation forwards at steps {list(steps)}" if steps else None)
    #: thunder's CUDA graph transform (``thunder.transforms.cudagraph.CUDAGraphTransform``) after the executor's.
    cuda_graphs: bool = _feature(False, lambda on: "thunder's CUDA graph transform" if on else None)
    #: ``thunder.jit(cache=...)`` ("symbolic values"); None: thunder's default.
    cache: str | None = _feature(None, lambda cache: f"thunder.jit(cache={cache!r})" if cache else None)
    #: The eager side only: a known upstream defect's model (``teparity.inrank.defect_models``), eager TE built to do
    #: what thunder does wrong; None: eager TE itself, the true reference.
    model: str | None = None
    #: The eager side only, under FSDP: in a micro-batch without the gradient reduction, each linear whose input requires
    #: grad accumulates that input's gradient in place of its weight's (a known defect's model:
    #: ``teparity.inrank.defect_models.InputGradAsWeightGrad``).
    input_grad_as_weight_grad: bool = False
    #: The eager side only: FP8 where the caller turned it off (a known defect's model, ``FP8_WHERE_OFF``): at every
    #: "off" step and in the network's own ``te.autocast(enabled=False)`` regions. None: as the caller says.
    fp8_where_off: str | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}: one of {list(STRATEGIES)}")
        if unknown := sorted(set(self.fp8_by_step) - set(FP8_MODES)):
            raise ValueError(f"unknown FP8 mode(s) {unknown}: each one of {list(FP8_MODES)}")
        if self.fp8_where_off is not None and self.fp8_where_off not in FP8_WHERE_OFF:
            raise ValueError(f"unknown fp8_where_off {self.fp8_where_off!r}: one of {list(FP8_WHERE_OFF)}")
        if not self.train and self.eval_steps:
            raise ValueError("eval_steps need a training run (train=True): every step of a no-grad run is a forward")
        if self.compile_path is None:  # the strategy's, stated there once
            object.__setattr__(self, "compile_path", self.parallel.compile_path or "jit")
        self.parallel.validate(self)

    @property
    def parallel(self) -> Strategy:
        """The strategy the spec names."""
        return STRATEGIES[self.strategy]

    def variant(self) -> str:
        """The program variant in words ("" for plain training under thunder.jit), for messages: each feature
        field's own words (``_feature``), in field order."""
        said = [words(getattr(self, field.name)) for field in dataclasses.fields(self) if (words := field.metadata.get(_SAYS))]
        return ", ".join(text for text in said if text)

    def recipe_id_at(self, step: int) -> str:
        return self.recipe_ids_by_step[step % len(self.recipe_ids_by_step)] if self.recipe_ids_by_step else self.recipe_id

    def fp8_at(self, step: int, side: Side) -> str:
        """What ``side`` runs the step's forward under: "on", "off" or "none" (``FP8_MODES``)."""
        mode = self.fp8_by_step[step % len(self.fp8_by_step)] if self.fp8_by_step else "on"
        said = FP8_MODES[mode][side == "thunder"]
        return self.fp8_where_off if said == "off" and side == "eager" and self.fp8_where_off else said

    def trains_at(self, step: int) -> bool:
        """Whether the step runs a backward and an optimizer step."""
        return self.train and step not in self.eval_steps

    def lead_shape_at(self, case: Case, step: int) -> tuple[int, ...]:
        return self.lead_shapes_by_step[step % len(self.lead_shapes_by_step)] if self.lead_shapes_by_step else case.lead_shape

    def resume_step(self) -> int | None:
        """The step that runs first after the checkpoint, or None."""
        return self.steps // 2 if self.resume_into else None


@dataclasses.dataclass
class StepRecord:
    outputs: list[Any]
    #: Per micro-batch; None where the input did not require grad (``reasons.no_input_grad_under_ddp``).
    input_grads: list[Any]
    param_grads: dict[str, Any]
    fp8_state: Snapshot
    backward_syncs: int


@dataclasses.dataclass
class CaseRun:
    case: Case
    steps: list[StepRecord]
    linear_names: list[str]
    forward: TraceSummary | None = None
    backward: TraceSummary | None = None
    #: Legacy executor: whether the forward trace's program is wrapped in fp8_autocast with our recipe.
    legacy_autocast: dict[str, bool] | None = None
    sync_mode: str = ""
    #: Thunder side: cache entries compiled (thunder.cache_misses); each has its own TE FP8 state.
    cache_entries: int | None = None
    #: One process only: the traceback of a case that raised (the other cases still run and compare).
    error: str | None = None

    def first_steps(self, steps: int) -> CaseRun:
        """This run as if it had stopped after ``steps`` steps (each step is recorded on its own)."""
        return dataclasses.replace(self, steps=self.steps[:steps])


def fp8_groups(world_size: int, group_size: int | None) -> list[list[int]]:
    """The ranks of each fp8 group: the world (None), or consecutive blocks of ``group_size`` ranks."""
    size = group_size or world_size
    if size < 1 or world_size % size:
        raise ValueError(f"fp8 groups of {size} ranks do not tile a world of {world_size}")
    return [list(range(first, first + size)) for first in range(0, world_size, size)]


@dataclasses.dataclass
class Pair:
    """Both sides of one parity run, each ``[rank][case]``, and where they ran. ``eager`` ran on
    ``scale_update``, the arithmetic of the executor (the verdict's reference); ``eager_fused`` is eager
    TE's default path where that differs, kept to measure the deviation from it (evidence only)."""

    spec: PairSpec
    world_size: int
    backend: str
    scale_update: ScaleUpdate
    eager: list[list[CaseRun]]
    thunder: list[list[CaseRun]]
    eager_fused: list[list[CaseRun]] | None = None
    #: Where a known upstream defect with a model covers the test: that model's eager side (the spec's ``model``
    #: names it), which thunder must match under the full rules (``teparity.gate.pairs.Pairs.judge_against_te_or_model``).
    modeled: list[list[CaseRun]] | None = None
    model_spec: PairSpec | None = None

    #: The known defect (``teparity.known.defect.KnownDefect``) whose model is this pair's eager side
    #: (``against_model``); None: the eager side is eager TE itself.
    judged_against: Any = None

    def against_model(self, entry: Any) -> Pair:
        """This pair with ``entry``'s model as its eager side (its spec names the model: the judges read what it
        predicts, and ``judged_against`` which defect it is)."""
        if self.modeled is None or self.model_spec is None:
            raise ValueError("this pair ran no defect model")
        return dataclasses.replace(self, spec=self.model_spec, eager=self.modeled, eager_fused=None, modeled=None,
                                   model_spec=None, judged_against=entry)

    def first_steps(self, steps: int) -> Pair:
        """The same pair judged over its first ``steps`` steps only (every side records step by step)."""

        def cut(side: list[list[CaseRun]] | None) -> list[list[CaseRun]] | None:
            if side is None:
                return None
            return [[run.first_steps(steps) for run in runs] for runs in side]

        return dataclasses.replace(
            self, spec=dataclasses.replace(self.spec, steps=steps),
            eager=cut(self.eager), thunder=cut(self.thunder), eager_fused=cut(self.eager_fused),
            modeled=cut(self.modeled), model_spec=self.model_spec and dataclasses.replace(self.model_spec, steps=steps),
        )


@dataclasses.dataclass(frozen=True)
class RankError:
    """An exception a rank caught, as plain data: its type, message and the functions of its traceback."""

    type: str
    message: str
    functions: tuple[str, ...]
    traceback: str

    @classmethod
    def of(cls, error: BaseException) -> RankError:
        kind = type(error)
        return cls(
            type=f"{kind.__module__}.{kind.__qualname__}",
            message=str(error),
            functions=tuple(frame.name for frame in traceback.extract_tb(error.__traceback__)),
            traceback="".join(traceback.format_exception(error)),
        )


@dataclasses.dataclass(frozen=True)
class Inference8BitRun:
    """A side of the 8-bit inference check (``teparity.inrank.inference8bit``): each no-grad forward's output on the
    CPU, and thunder's last execution trace's symbols; or what thunder's side raised."""

    outputs: tuple[Any, ...] = ()
    symbols: tuple[str, ...] = ()
    error: RankError | None = None


@dataclasses.dataclass(frozen=True)
class TeModulesRun:
    """A side of the TE-module check (``teparity.inrank.te_modules``): per step the output, the parameters after the
    optimizer step and every TE module's FP8 state, on the CPU; or what thunder's side raised, and what an eager TE
    step in the same process raised after it (None: it ran)."""

    outputs: tuple[Any, ...] = ()
    parameters: tuple[dict[str, Any], ...] = ()
    states: tuple[dict[str, Any], ...] = ()
    error: RankError | None = None
    eager_after: str | None = None


@dataclasses.dataclass(frozen=True)
class DdpTransformRun:
    """Per step: the output, the input gradient (None when the input does not require grad) and the
    all-reduced parameter gradients, on the CPU; or the error the thunder side raised."""

    outputs: tuple[Any, ...] = ()
    input_grads: tuple[Any, ...] = ()
    param_grads: tuple[dict[str, Any], ...] = ()
    error: RankError | None = None
    #: Thunder side: the distributed symbols of the last backward execution trace, in order
    #: (``torch_*_prim_impl``: all-reduce, wait, and with gradient bucketing pack, unpack, bucket views).
    backward_collectives: tuple[str, ...] = ()
    #: thunderfx's side: the thunder programs it made of the network, and their compilations after each step (None
    #: where the build does not say).
    programs: int | None = None
    compiles_by_step: tuple[int | None, ...] = ()
