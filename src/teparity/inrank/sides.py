"""The two sides of a parity pair, inside a rank: ``run_eager`` (eager TE) and ``run_thunder`` (thunder + the spec's TE
executor), each as the spec's strategy builds its program (``teparity.inrank.strategies``).

Each runs every case of the spec for ``spec.steps`` optimizer steps, each of ``spec.micro_batches``
forward/backward passes (all but the last without the gradient all-reduce), and returns per step the
output, the gradients (input and parameters, after the all-reduce), the FP8 state and the backward
syncs that ran; the thunder side also the trace summaries. The data is in ``teparity.records``.

Each side is a run of its own on the ranks. TE keeps every delayed-scaling module in global amax
buffers and each update rolls all of them, so an eager network and a thunder one in one run would update
each other's state (docs/facts.md); between runs, fresh processes or the reset of
``teparity.inrank.task.in_rank`` keep the sides independent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
from collections.abc import Callable
from typing import Any

from teparity.inrank import fp8state
from teparity.inrank.syncspy import record_fp8_syncs
from teparity.records import (
    NOTHING_STASHED,
    Case,
    CaseRun,
    PairSpec,
    ScaleUpdate,
    Side,
    Snapshot,
    StepRecord,
    fp8_groups,
    reference_update,
)
from teparity.stack import recipes
from teparity.stack.executors import ExecutorInfo, executor_module, find_te_executors
from teparity.stack.reasons import no_input_grad_under_ddp
from teparity.stack.te_api import te_autocast
from teparity.stack.thunder_api import jit_options
from teparity.stack.versions import installed_version
from teparity.trace_summary import summarize


def _dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _input(case: Case, lead_shape: tuple[int, ...], *, step: int, micro: int, rank: int, device: str,
           requires_grad: bool) -> Any:
    from teparity.inrank.networks import seeded_input

    x = seeded_input(
        (*lead_shape, case.sizes[0]), test_seed=case.seed * 1000 + micro, step=step, rank=rank,
        device=device, dtype=_dtype(case.arch.input_dtype or case.dtype),
    )
    return x.requires_grad_(requires_grad)


def _grad_output(case: Case, lead_shape: tuple[int, ...], *, step: int, micro: int, rank: int, device: str) -> Any:
    from teparity.inrank.networks import seeded_input

    return seeded_input(
        (*lead_shape, case.sizes[-1]), test_seed=case.seed * 1000 + 500 + micro, step=step, rank=rank,
        device=device, dtype=_dtype(case.dtype),
    )


def _fp8_group(spec: PairSpec, rank: int, world_size: int) -> Any:
    """None (TE's default: the world) or the process group of this rank's block (every rank creates
    every group, in the same order, as ``new_group`` requires)."""
    import torch.distributed as dist

    if spec.fp8_group_size is None:
        return None
    created = [(ranks, dist.new_group(ranks)) for ranks in fp8_groups(world_size, spec.fp8_group_size)]
    return next(group for ranks, group in created if rank in ranks)


def _device() -> str:
    """NCCL: the GPU the harness gave this rank (spawned: its rank; torchrun: LOCAL_RANK, so a global
    rank on another node is no device index); gloo: every rank shares GPU 0."""
    import torch
    import torch.distributed as dist

    return f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cuda:0"


def run_eager(rank: int, world_size: int, spec: PairSpec, scale_update: ScaleUpdate = "fused") -> list[CaseRun]:
    """Eager TE on this rank, on TE's ``scale_update`` path (``teparity.records.ScaleUpdate``)."""
    with te_scale_update(scale_update):
        return _run_side("eager", rank, world_size, spec)


def run_thunder(rank: int, world_size: int, spec: PairSpec) -> list[CaseRun]:
    """thunder + ``spec.executor`` on this rank (its scale update is the executor's own)."""
    return _run_side("thunder", rank, world_size, spec)


def _run_side(side: Side, rank: int, world_size: int, spec: PairSpec) -> list[CaseRun]:
    """Every case of the spec on this rank's GPU, each trained as the spec's strategy builds its program."""
    import torch

    torch.cuda.set_device(_device())
    group = _fp8_group(spec, rank, world_size)
    return [_run_case_or_record(side, spec, case, rank, world_size, group) for case in spec.cases]


UNFUSED_UPDATE_VARIABLE = "NVTE_UNFUSED_FP8_UPDATE"


def te_scale_update(update: ScaleUpdate) -> Any:
    """Make TE take the Python update for the duration ("fused": leave the environment as it is)."""
    import os
    from unittest import mock

    return mock.patch.dict(os.environ, {UNFUSED_UPDATE_VARIABLE: "1"} if update == "python" else {})


def _run_case_or_record(side: Side, spec: PairSpec, case: Case, rank: int, world_size: int, group: Any) -> CaseRun:
    """One case; with one process a case that raises is recorded (the others still run and compare)."""
    run = CaseRun(case=case, steps=[], linear_names=[])
    try:
        _run_case(side, spec, run, rank, group)
    except Exception as error:
        if world_size > 1:  # a rank that goes on alone would meet its peers in the wrong collective
            if hasattr(error, "add_note"):  # Python 3.11+: the traceback then names the case
                error.add_note(f"teparity: {side} side ({spec.parallel.words}), case {case.label()}")
            raise
        # The exception first (a long message would push it out of a tail), then the traceback; the traces
        # recorded so far stay: TE claims are judged first.
        summary = "".join(traceback.format_exception_only(error)).strip().splitlines()[0][:400]
        run.error = f"{summary}\n{traceback.format_exc()}"
    return run


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


def eager_module(plain: Any, spec: PairSpec, group: Any, case: Case) -> Any:
    """The eager side's module: the network's ``te.Linear`` twin, or the spec's defect model of it
    (``teparity.inrank.defect_models``)."""
    from teparity.inrank import networks

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
    import torch

    network: Any = module
    trained = module.trained() if spec.model is not None else module
    program = Program(network, dict(trained.named_parameters()), lambda recipe: te_autocast(recipe, group),
                      contextlib.nullcontext, checkpoint=getattr(module, "checkpoint", trained.state_dict), runs_eager=True)
    if ddp:
        device_ids = [torch.cuda.current_device()] if torch.distributed.get_backend() == "nccl" else None
        program.network = torch.nn.parallel.DistributedDataParallel(network, device_ids=device_ids)
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
    """The compile options: the executor, its recipe, the spec's cache."""
    return jit_options(info, first_recipe) | ({"cache": spec.cache} if spec.cache else {})


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


def _resumed(side: Side, program: Program, spec: PairSpec, group: Any, case: Case, info: ExecutorInfo, recipe: Any) -> Program:
    """The program after a checkpoint: what ``program`` saved (``Program.checkpoint``) loaded into a freshly built
    network, compiled again (the thunder side resuming into thunder: ``plain.load_state_dict``, strict) or as eager TE
    (``resume_into`` "eager": the thunder side goes on as eager TE; the eager side as eager TE, or its defect model
    again where it resumes into thunder). Where the thunder side goes on as eager TE, no thunder defect acts after the
    checkpoint: a model's side goes on as eager TE too, from its checkpoint without FP8 state, which is all a thunder
    checkpoint holds (``checkpoint-drops-fp8-state``). Eager TE loads not strictly: a checkpoint without TE's
    ``_extra_state`` loads, anything else missing or unexpected raises; a delayed-scaling ``_extra_state`` is a pickle
    that TE 2.20 loads only with ``TRUSTED_PICKLE_VARIABLE`` set (this one is the run's own)."""
    import os
    from unittest import mock

    from teparity.inrank import networks

    from teparity.inrank.strategies import builder

    saved = program.checkpoint() if program.checkpoint else program.network.state_dict()
    plain = _network(case, _device())
    if side == "thunder" and spec.resume_into == "thunder":
        plain.load_state_dict(saved)
        return builder(spec)("thunder", plain, spec, group, case, info, recipe)
    eager_spec = spec
    if side == "thunder" or (spec.resume_into == "eager" and spec.model is not None):
        eager_spec, saved = dataclasses.replace(spec, model=None), (saved if side == "thunder" else networks.without_fp8_state(saved))
    module = eager_module(plain, eager_spec, group, case)
    with mock.patch.dict(os.environ, {TRUSTED_PICKLE_VARIABLE: "1"}):
        unloaded = (module.trained() if eager_spec.model is not None else module).load_state_dict(saved, strict=False)
    if unloaded.unexpected_keys or any(not key.endswith(networks.TE_EXTRA_STATE) for key in unloaded.missing_keys):
        raise AssertionError(f"the {side} side's checkpoint does not fit eager TE: missing {unloaded.missing_keys}, "
                             f"unexpected {unloaded.unexpected_keys}")
    return eager_program(module, eager_spec, group, ddp=False)


#: TE 2.20 refuses to unpickle a delayed-scaling ``_extra_state`` unless this is 1 (``transformer_engine.pytorch.
#: _extra_state``: a pickle can run code); TE 2.12 and before load it as is.
TRUSTED_PICKLE_VARIABLE = "NVTE_ALLOW_UNSAFE_PICKLE_EXTRA_STATE"


def _run_case(side: Side, spec: PairSpec, run: CaseRun, rank: int, group: Any) -> None:
    """Fill ``run`` step by step with the program the spec's strategy builds; the thunder side's traces as soon as the
    first backward has run. The one step loop of every parity side, whatever the strategy."""
    import torch

    from teparity.inrank import networks
    from teparity.inrank.strategies import builder

    plain = _network(run.case, _device())
    run.linear_names = networks.linear_names(plain)
    info = find_te_executors()[spec.executor]
    recipe_at = _recipe_schedule(spec)
    program = builder(spec)(side, plain, spec, group, run.case, info, recipe_at(0))
    optimizer = torch.optim.SGD(list(program.parameters.values()), lr=spec.lr)
    # Both sides alike: where thunder's DDP transform cannot take it, no input requires grad.
    input_grad = spec.train and not (spec.parallel.thunder_ddp and no_input_grad_under_ddp(installed_version("lightning-thunder")))
    with record_fp8_syncs(None) as syncs, contextlib.ExitStack() as resumed:
        for step in range(spec.steps):
            recipe, before = recipe_at(step), syncs.backward_calls()
            if step == spec.resume_step():
                program = _resumed(side, program, spec, group, run.case, info, recipe)
                optimizer = torch.optim.SGD(list(program.parameters.values()), lr=spec.lr)
                if side == "thunder" and program.runs_eager:  # eager TE goes on where thunder was: its arithmetic
                    resumed.enter_context(te_scale_update(reference_update(spec.executor)))
            outputs, input_grads = _micro_batches(spec, run.case, program, recipe, step, rank, input_grad)
            grads = {n: program.full(n, p.grad).detach().float().cpu().clone() for n, p in program.parameters.items()
                     if p.grad is not None}
            state = _step_state(side, run, program, rank, info, recipe, spec)
            run.steps.append(StepRecord(outputs, input_grads, grads, state, syncs.backward_calls() - before))
            if spec.train:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    run.sync_mode = syncs.mode


def _micro_batches(spec: PairSpec, case: Case, program: Program, recipe: Any, step: int, rank: int,
                   input_grad: bool) -> tuple[list[Any], list[Any]]:
    """One step's forward (and backward) passes: the outputs and input gradients of each micro-batch, all but the
    last inside one ``no_sync`` span (as a training loop accumulates: thunder's ``ThunderModule.no_sync`` all-reduces
    what accumulated there when the span ends)."""
    import torch

    device, lead_shape = _device(), spec.lead_shape_at(case, step)
    outputs, input_grads = [], []
    with contextlib.ExitStack() as accumulating:
        if spec.micro_batches > 1:
            accumulating.enter_context(program.no_sync())
        for micro in range(spec.micro_batches):
            last = micro == spec.micro_batches - 1
            if last:
                accumulating.close()
            requires_grad = input_grad and (last or not program.input_grad_last_only)
            x = _input(case, lead_shape, step=step, micro=micro, rank=rank, device=device, requires_grad=requires_grad)
            program.choose(recipe, last)
            with torch.set_grad_enabled(spec.train), _torch_autocast(spec), program.fp8(recipe):
                y = program.network(x)
            if spec.train:
                y.backward(_grad_output(case, lead_shape, step=step, micro=micro, rank=rank, device=device).to(y.dtype))
            outputs.append(y.detach().float().cpu())
            input_grads.append(None if x.grad is None else x.grad.detach().float().cpu())
    program.finish()
    torch.cuda.synchronize()
    return outputs, input_grads


def _step_state(side: Side, run: CaseRun, program: Program, rank: int, info: ExecutorInfo, recipe: Any, spec: PairSpec) -> Snapshot:
    """The FP8 state after a step (no backward ran in inference: only the forward roles hold state)."""
    if program.runs_eager:
        state = fp8state.eager_snapshot(program.state_module() if program.state_module else program.network)
    else:
        state = _thunder_snapshot(run, program.network, rank, info, recipe, spec)
    return state if spec.train else fp8state.forward_roles(state)


def _network(case: Case, device: str) -> Any:
    from teparity.inrank import networks

    arch = case.arch
    fields = {field: getattr(case, field) for field in arch.case_fields}
    return getattr(networks, arch.builder)(case.sizes, seed=case.seed, device=device, dtype=_dtype(case.dtype), **fields)


def _recipe_schedule(spec: PairSpec) -> Any:
    """``step -> recipe object``: each id's object built once (a recipe change goes back to the same
    object), or a new one every step with ``spec.new_recipe_each_step``."""
    import functools

    built = functools.cache(recipes.build)
    if spec.new_recipe_each_step:
        return lambda step: recipes.build(spec.recipe_id_at(step))
    return lambda step: built(spec.recipe_id_at(step))


def _torch_autocast(spec: PairSpec) -> Any:
    import torch

    if spec.torch_autocast is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=_dtype(spec.torch_autocast))


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


def _last_traces(compiled: Any, spec: PairSpec) -> tuple[Any, Any | None, int | None]:
    """(forward, backward or None without one, cache entries or None where thunder does not count them)
    execution traces of the last call. thunderfx must have handed the whole program to one thunder
    subgraph, compiled once: the checks read one trace per direction, and a Dynamo graph compiled again (a
    recompile, at a distributed wrapper's hook, say) is a thunder program with an FP8 state of its own. Its
    count is the Dynamo graphs compiled (None where the build does not say)."""
    import thunder

    if spec.compile_path == "thunderfx":
        forwards, backwards = compiled.last_traces, compiled.last_backward_traces
        graphs = getattr(getattr(compiled, "_backend", None), "subgraph_infos", None)
        if len(forwards) != 1:
            raise AssertionError(f"thunderfx made {len(forwards)} thunder programs of the program "
                                 f"({'?' if graphs is None else len(graphs)} Dynamo graph(s) compiled: graph breaks or "
                                 "recompiles), expected 1")
        return forwards[0], (backwards[0] if backwards else None), (None if graphs is None else len(graphs))
    backwards = _executed_backward_traces(compiled)
    return thunder.last_traces(compiled)[-1], (backwards[-1] if backwards else None), thunder.cache_misses(compiled)


def _executed_backward_traces(compiled: Any) -> Any:
    """The backward traces of the cache entry the last call ran. ``thunder.last_backward_traces`` are those of the
    entry compiled last: a cache hit updates ``last_traces`` only (thunder/__init__.py), so after a call of an older
    entry (an earlier input shape) it pairs that entry's forward with another entry's backward and its FP8 states."""
    import thunder

    forward = thunder.last_traces(compiled)
    for entry in getattr(thunder.compile_stats(compiled), "interpreter_cache", ()):
        if getattr(entry, "computation_traces", None) is forward:
            return entry.backward_traces
    return thunder.last_backward_traces(compiled)


def _thunder_snapshot(run: CaseRun, compiled: Any, rank: int, info: ExecutorInfo, recipe: Any, spec: PairSpec) -> Snapshot:
    """Record the last forward and backward execution traces in ``run`` (with the compiled cache entries
    and the legacy autocast facts) before reading the FP8 state through them: if the state cannot be
    read, the traces still tell whether TE held the linears."""
    forward, backward, run.cache_entries = _last_traces(compiled, spec)
    run.forward = summarize(forward, f"rank {rank} forward trace")
    run.backward = None if backward is None else summarize(backward, f"rank {rank} backward trace")
    if info.kind == "legacy":
        run.legacy_autocast = _legacy_autocast_facts(info, forward, recipe)
        return fp8state.legacy_snapshot(forward, run.linear_names)
    return fp8state.functional_snapshot(forward, backward, run.linear_names)


def thunder_no_sync(compiled: Any) -> Callable[[], Any]:
    """thunder's gradient accumulation context of a data-parallel module: ``ThunderModule.no_sync``, which skips the
    gradient reduction inside and reduces what accumulated there when it ends (``thunder.distributed``'s bare
    ``skip_data_parallel_grad_sync`` leaves those gradients unreduced: a training loop uses ``no_sync``). Its
    reduction batches collectives (``_coalescing_manager``), which gloo does not run on CUDA tensors
    (``ProcessGroupGloo::allreduce_coalesced: unsupported device type cuda``): on gloo the same collectives run one
    by one (``_sync_grads_one_by_one``)."""
    import torch.distributed as dist

    if not hasattr(compiled, "no_sync"):
        raise TypeError(f"{type(compiled).__name__} has no no_sync: not a thunder data-parallel module")

    @contextlib.contextmanager
    def no_sync() -> Any:
        import thunder.distributed

        if dist.get_backend() != "gloo":
            with compiled.no_sync():
                yield
                _stashed(compiled)  # thunder's own reduction returns early, silently, where nothing was stashed
            return
        with thunder.distributed.skip_data_parallel_grad_sync():
            yield
        _sync_grads_one_by_one(compiled)

    return no_sync


def _stashed(module: Any) -> list[tuple[str, Any]]:
    """Under thunder's FSDP: each parameter's stashed unsharded gradient, by name, where ``_sync_grads`` looks for it
    (the original module's parameters); raises ``NOTHING_STASHED`` where there is none. [] under DDP."""
    if not getattr(module, "use_fsdp", False):
        return []
    found = [(name, unsharded) for name, _ in module.named_parameters()
             if (unsharded := getattr(module._model.get_parameter(name), "_thunder_fsdp_unsharded_grad", None)) is not None]
    if not found:
        raise AssertionError(NOTHING_STASHED)
    return found


def average_over_ranks(grads: list[Any]) -> None:
    """What thunder's DDP ``_sync_grads`` does to accumulated gradients, in place: divide by the world size, then
    all-reduce (sum), one collective per tensor."""
    import torch
    import torch.distributed as dist

    torch._foreach_div_(grads, dist.get_world_size())
    for grad in grads:
        dist.all_reduce(grad)


def _sync_grads_one_by_one(module: Any) -> None:
    """What ``thunder.distributed._sync_grads`` does on leaving ``no_sync``, each collective on its own: DDP averages
    every accumulated gradient over the ranks; FSDP reduce-scatters (averaging) each parameter's stashed unsharded
    gradient into its shard's ``grad``."""
    import torch.distributed as dist

    world = dist.get_world_size()
    if getattr(module, "use_ddp", False):
        average_over_ranks([p.grad for p in module.parameters() if p.grad is not None])
        return
    if not getattr(module, "use_fsdp", False):
        raise TypeError(f"{type(module).__name__} is neither thunder's DDP nor its FSDP (no use_ddp, no use_fsdp)")
    rank = dist.get_rank()
    for name, unsharded in _stashed(module):
        shard = unsharded.narrow(0, rank * (unsharded.size(0) // world), unsharded.size(0) // world).clone()
        dist.reduce_scatter_tensor(shard, unsharded.div(world))
        module.get_parameter(name).grad = shard
        del module._model.get_parameter(name)._thunder_fsdp_unsharded_grad


def _legacy_autocast_facts(info: ExecutorInfo, forward_trace: Any, recipe: Any) -> dict[str, bool]:
    """Is the legacy forward program wrapped in fp8_autocast, and bound to the recipe we passed?"""
    module = executor_module(info)
    wrapper = getattr(module, "TE_CTX_STR", "fp8_autocast(")
    return {
        "wrapped": wrapper in forward_trace.python(),
        "recipe_is_ours": forward_trace.python_ctx().get("te_fp8_recipe") is recipe,
    }


class ThunderStyleAccumulation:
    """Gradient accumulation on the eager side as thunder documents its own (``ThunderModule.no_sync``): the
    micro-batches inside the span accumulate unreduced (torch DDP's ``no_sync``); leaving it, what accumulated is
    averaged over the ranks; the last micro-batch's gradients are averaged alone and added to it. torch DDP averages
    the whole sum at once instead, which rounds apart, and FP8 turns a rounding difference into a quantization step:
    the same summation keeps the sides exact. ``span()`` is the no-sync context; ``finish()`` runs after the last
    backward."""

    def __init__(self, ddp: Any, parameters: dict[str, Any]) -> None:
        self.ddp, self.parameters, self.accumulated = ddp, parameters, {}

    @contextlib.contextmanager
    def span(self) -> Any:
        with self.ddp.no_sync():
            yield
        average_over_ranks([p.grad for p in self.parameters.values() if p.grad is not None])
        # Out of DDP's sight: its reducer would average them again with the last micro-batch's.
        self.accumulated = {name: p.grad for name, p in self.parameters.items() if p.grad is not None}
        for name in self.accumulated:
            self.parameters[name].grad = None

    def finish(self) -> None:
        for name, grad in self.accumulated.items():
            parameter = self.parameters[name]
            parameter.grad = grad if parameter.grad is None else parameter.grad + grad
        self.accumulated = {}
