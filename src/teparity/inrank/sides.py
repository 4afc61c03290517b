"""The two sides of a parity pair, inside a rank: ``run_eager`` (eager TE) and ``run_thunder`` (thunder + the spec's TE
executor), each as the spec's strategy builds its program (``teparity.inrank.strategies``, from the parts of
``teparity.inrank.program``): the one step loop that trains it, and a checkpoint's resumption.

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
from typing import Any

from teparity.inrank.program import Program, eager_module, eager_program, rank_device, te_scale_update
from teparity.inrank.recording import step_state
from teparity.inrank.strategies import builder
from teparity.inrank.syncspy import record_fp8_syncs
from teparity.records import Case, CaseRun, PairSpec, ScaleUpdate, Side, StepRecord, fp8_groups, reference_update
from teparity.stack import recipes, since
from teparity.stack.executors import ExecutorInfo, find_te_executors
from teparity.stack.te_api import te_autocast


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

    torch.cuda.set_device(rank_device())
    group = _fp8_group(spec, rank, world_size)
    return [_run_case_or_record(side, spec, case, rank, world_size, group) for case in spec.cases]


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

    saved = program.checkpoint() if program.checkpoint else program.network.state_dict()
    plain = _network(case, rank_device())
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

    plain = _network(run.case, rank_device())
    run.linear_names = networks.linear_names(plain)
    info = find_te_executors()[spec.executor]
    recipe_at = _recipe_schedule(spec)
    program = builder(spec)(side, plain, spec, group, run.case, info, recipe_at(0))
    optimizer = torch.optim.SGD(list(program.parameters.values()), lr=spec.lr)
    # Both sides alike: where thunder's DDP transform cannot take it, no input requires grad.
    input_grad = spec.train and (not spec.parallel.thunder_ddp or since.installed_thunder_reached(since.DDP_INPUT_GRAD_SINCE))
    with record_fp8_syncs(None) as syncs, contextlib.ExitStack() as resumed:
        for step in range(spec.steps):
            recipe, before = recipe_at(step), syncs.backward_calls()
            if step == spec.resume_step():
                program = _resumed(side, program, spec, group, run.case, info, recipe)
                optimizer = torch.optim.SGD(list(program.parameters.values()), lr=spec.lr)
                if side == "thunder" and program.runs_eager:  # eager TE goes on where thunder was: its arithmetic
                    resumed.enter_context(te_scale_update(reference_update(spec.executor)))
            outputs, input_grads = _micro_batches(side, spec, run.case, program, recipe, step, rank, input_grad)
            grads = {n: program.full(n, p.grad).detach().float().cpu().clone() for n, p in program.parameters.items()
                     if p.grad is not None}
            state = step_state(run, program, rank, info, recipe, spec, step)
            run.steps.append(StepRecord(outputs, input_grads, grads, state, syncs.backward_calls() - before))
            if spec.trains_at(step):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    run.sync_mode = syncs.mode


def _fp8(side: Side, spec: PairSpec, program: Program, recipe: Any, step: int) -> Any:
    """The FP8 context of the step's forward on ``side`` (``PairSpec.fp8_at``): the program's own where FP8 is on."""
    mode = spec.fp8_at(step, side)
    if mode == "on":
        return program.fp8(recipe)
    if mode == "on-without-forward-update":
        from teparity.inrank.defect_models import without_forward_update

        return without_forward_update(program.fp8(recipe))
    return te_autocast(recipe, enabled=False) if mode == "off" else contextlib.nullcontext()


def _micro_batches(side: Side, spec: PairSpec, case: Case, program: Program, recipe: Any, step: int, rank: int,
                   input_grad: bool) -> tuple[list[Any], list[Any]]:
    """One step's forward (and backward) passes: the outputs and input gradients of each micro-batch, all but the
    last inside one ``no_sync`` span (as a training loop accumulates: thunder's ``ThunderModule.no_sync`` all-reduces
    what accumulated there when the span ends). An evaluation step runs the forwards only."""
    import torch

    device, lead_shape = rank_device(), spec.lead_shape_at(case, step)
    backward = spec.trains_at(step)
    input_grad = input_grad and backward
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
            with torch.set_grad_enabled(spec.train), _torch_autocast(spec), _fp8(side, spec, program, recipe, step):
                y = program.network(x)
            if backward:
                y.backward(_grad_output(case, lead_shape, step=step, micro=micro, rank=rank, device=device).to(y.dtype))
            outputs.append(y.detach().float().cpu())
            input_grads.append(None if x.grad is None else x.grad.detach().float().cpu())
    program.finish()
    torch.cuda.synchronize()
    return outputs, input_grads


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


