"""What a side trains, built: a ``Program`` (the network, the parameters its optimizer steps, its FP8 autocast, its
gradient accumulation) and the parts every strategy builds its sides from (``teparity.inrank.strategies``): the eager
module and program, the thunder network, options, compilation and program, torch DDP over a module, and the rank's
device. Building only: the step loop that trains a program is ``teparity.inrank.sides``."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from teparity.inrank.accumulation import ThunderStyleAccumulation
from teparity.records import Case, PairSpec, ScaleUpdate, Side
from teparity.stack.executors import ExecutorInfo
from teparity.stack.te_api import te_autocast
from teparity.stack.thunder_api import jit_options


@dataclasses.dataclass
class Program:
    """One side's program, ready to train: the network, the parameters its optimizer steps and whose gradients are
    compared (in this order: an FSDP gradient's gather is a collective, in one order on every rank), its FP8 autocast
    for a recipe, and its context for a micro-batch without the gradient reduction; a defect model's ``choose``
    before each forward and the module whose FP8 state a step reads."""

    network: Any
    parameters: dict[str, Any]
    fp8: Callable[[Any], Any]
    no_sync: Callable[[], Any]
    choose: Callable[[Any, bool], None] = lambda recipe, synced: None
    state_module: Callable[[], Any] | None = None
    #: After a step's last backward (the eager side's ``ThunderStyleAccumulation.finish``).
    finish: Callable[[], None] = lambda: None
    #: A parameter's whole gradient from what its ``grad`` holds (an FSDP shard gathered, a DTensor made full).
    full: Callable[[str, Any], Any] = lambda name, grad: grad
    #: Only the last micro-batch's input requires grad: a no-sync backward of thunder's FSDP stashes the unsharded
    #: parameter gradients and returns none, an input's neither (``stash_unsharded_grads_and_return_none_as_grads``).
    input_grad_last_only: bool = False
    #: What a checkpoint of it holds (``state_dict()``; a defect model's own).
    checkpoint: Callable[[], dict[str, Any]] | None = None
    #: Eager TE, whose FP8 state its modules hold: the eager side, and the thunder side resumed into eager TE.
    runs_eager: bool = False


#: How a side builds its program: ``(side, plain network, spec, FP8 group, case, executor, first recipe) -> Program``.
Builder = Callable[[Side, Any, PairSpec, Any, Case, ExecutorInfo, Any], Program]

UNFUSED_UPDATE_VARIABLE = "NVTE_UNFUSED_FP8_UPDATE"


def te_scale_update(update: ScaleUpdate) -> Any:
    """Make TE take the Python update for the duration ("fused": leave the environment as it is)."""
    import os
    from unittest import mock

    return mock.patch.dict(os.environ, {UNFUSED_UPDATE_VARIABLE: "1"} if update == "python" else {})


def rank_device() -> str:
    """NCCL: the GPU the harness gave this rank (spawned: its rank; torchrun: LOCAL_RANK, so a global
    rank on another node is no device index); gloo: every rank shares GPU 0."""
    import torch
    import torch.distributed as dist

    return f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cuda:0"


def torch_ddp(module: Any) -> Any:
    """torch DDP over ``module`` on this rank's GPU (NCCL: one GPU per rank; gloo: no device ids)."""
    import torch

    device_ids = [torch.cuda.current_device()] if torch.distributed.get_backend() == "nccl" else None
    return torch.nn.parallel.DistributedDataParallel(module, device_ids=device_ids)


def eager_module(plain: Any, spec: PairSpec, group: Any, case: Case) -> Any:
    """The eager side's module: the network's ``te.Linear`` twin, or the spec's defect model of it
    (``teparity.inrank.defect_models``)."""
    from teparity.inrank import networks

    if spec.fp8_where_off is not None:  # the network's own FP8-off regions run in FP8 too
        for layer in plain.modules():
            if isinstance(layer, networks.Fp8OffEnds):
                layer.ends_off = False
    if spec.model is None:
        return networks.te_twin(plain)
    from teparity.inrank.defect_models import eager_model
    from teparity.records import checkpoint_recomputes

    fewest, most = checkpoint_recomputes(case) if spec.checkpoint else (0, 0)
    recomputed = most if spec.compile_path == "thunderfx" else fewest
    return eager_model(spec.model, plain, executor=spec.executor, compile_path=spec.compile_path, recomputed=recomputed,
                       group=group)


def eager_program(module: Any, spec: PairSpec, group: Any, *, ddp: bool) -> Program:
    """``module`` (``eager_module``) as the eager side's program: under torch DDP with thunder's way of accumulating
    gradients where ``ddp`` (thunder ddp's reference, and a sharding strategy's DDP reference); a defect model's choice of module per
    micro-batch, and the no-sync stash of input gradients where the spec models it."""
    trained = module.trained() if spec.model is not None else module
    program = Program(module, dict(trained.named_parameters()), lambda recipe: te_autocast(recipe, group),
                      contextlib.nullcontext, checkpoint=getattr(module, "checkpoint", trained.state_dict), runs_eager=True)
    if ddp:
        program.network = torch_ddp(module)
        accumulation = ThunderStyleAccumulation(program.network, program.parameters)
        program.no_sync, program.finish = accumulation.span, accumulation.finish
    if spec.model is not None:
        program.choose, program.state_module = module.choose, module.state_module
    if spec.input_grad_as_weight_grad:
        program.choose = _stashing_input_grads(module, program.choose)
    return program


def _stashing_input_grads(module: Any, choose: Callable[[Any, bool], None]) -> Callable[[Any, bool], None]:
    """``choose`` that also tells ``defect_models.InputGradAsWeightGrad`` over ``module`` whether the micro-batch
    reduces (a defect of thunder's FSDP no-sync stash)."""
    from teparity.inrank.defect_models import InputGradAsWeightGrad

    stash = InputGradAsWeightGrad(module)

    def both(recipe: Any, synced: bool) -> None:
        stash.choose(synced)
        choose(recipe, synced)

    return both


def thunder_fp8(spec: PairSpec, group: Any) -> Callable[[Any], Any]:
    """The thunder side's FP8 context for a recipe: the legacy executor wraps its forward in fp8_autocast itself (with
    no group); the functional one reads the recipe (and group) from the caller's autocast."""
    if spec.executor == "legacy":
        return lambda recipe: contextlib.nullcontext()
    return lambda recipe: te_autocast(recipe, group)


def thunder_network(plain: Any, spec: PairSpec) -> Any:
    """What thunder compiles: the network, its layers before the last under activation checkpointing where the spec
    asks (the same modules: the same parameter names)."""
    from teparity.inrank import networks

    return networks.CheckpointedMLP(*plain) if spec.checkpoint else plain


def thunder_options(spec: PairSpec, info: ExecutorInfo, first_recipe: Any) -> dict[str, Any]:
    """The compile options: the executor, its recipe, the spec's cache and CUDA graphs."""
    options = jit_options(info, first_recipe) | ({"cache": spec.cache} if spec.cache else {})
    if spec.cuda_graphs:
        from thunder.transforms.cudagraph import CUDAGraphTransform

        options["transforms"] = [*options.get("transforms", ()), CUDAGraphTransform()]
    return options


def thunder_program(compiled: Any, plain: Any, spec: PairSpec, group: Any, no_sync: Callable[[], Any] = contextlib.nullcontext,
                    full: Callable[[str, Any], Any] | None = None) -> Program:
    """``compiled`` (thunder's program of ``plain``) as the thunder side's program. thunderfx trains the module's own
    parameters (torch.compile), and its compiled object has no ``state_dict``: the module's is the checkpoint."""
    if spec.compile_path == "thunderfx":
        parameters, saved = dict(plain.named_parameters()), plain.state_dict
    else:
        parameters, saved = {name: compiled.get_parameter(name) for name, _ in plain.named_parameters()}, compiled.state_dict
    program = Program(compiled, parameters, thunder_fp8(spec, group), no_sync, checkpoint=saved)
    if full is not None:
        program.full = full
    return program


def compile_thunder(network: Any, options: dict[str, Any], spec: PairSpec) -> Any:
    """thunder + the executor, by the spec's compile path (``thunder.jit``, or torch.compile with thunder as its
    backend)."""
    import thunder

    if spec.compile_path == "thunderfx":
        import torch
        from thunder.dynamo import thunderfx

        # Each case its own program: Dynamo keys its cache on the forward's code, so a second case of another shape
        # would be a recompile with symbolic sizes, a path no check means to test (thunder up to 0.2.3.dev20250518
        # maps a checkpointed region's gradients onto its size arguments there: docs/facts.md).
        torch._dynamo.reset()
        return thunderfx(network, **options)
    return thunder.jit(network, **options)
