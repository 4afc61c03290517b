"""The two sides of an FSDP parity pair, inside a rank: ``run_thunder_fsdp`` (thunder + the spec's TE executor under
``thunder.distributed.fsdp``, ``spec.fsdp`` "ZERO2" or "ZERO3") and ``run_eager_fsdp``, eager TE under the spec's
reference (``spec.fsdp_reference``):

- ``"fsdp2"``: torch FSDP2 (``fully_shard``) over the ``te.Linear`` twins, ``reshard_after_forward`` False for ZeRO2
  and True for ZeRO3. FSDP2 shards every parameter on dim 0, as thunder does, and is what TE's own FSDP test uses
  (tests/pytorch/distributed/run_fsdp2_model.py: ``fully_shard`` on every ``te.Linear``, then the root, keeping the
  attributes TE set on its parameters). The reference where every rank has a GPU of its own (NCCL).
- ``"ddp"``: torch DDP over the same twins. thunder's FSDP averages each gradient over the ranks and gathers the
  same full parameters as DDP keeps, so its gathered gradients and parameters must be DDP's, and its FP8 state (the
  amaxes all-reduced over the world) DDP's eager TE state. The reference where torch FSDP2 over ``te.Linear`` cannot
  run: gloo ranks sharing one GPU, where it dies of SIGSEGV (``teparity.stack.reasons.fsdp_backend_unfit``). It does
  not shard, so one run serves ZeRO2 and ZeRO3.

They return ``list[CaseRun]`` as ``sides.run_eager`` / ``run_thunder`` do, so that ``judge.parity`` judges them
unchanged; the parameter gradients are the full ones (FSDP2's ``DTensor.full_tensor()``; thunder's shards gathered by
``all_gather_into_tensor``, cut to the parameter's shape; DDP's are full), and the thunder side records its traces
(the collectives and amax updates whose order the fsdp tier compares across ranks). Micro-batches but the last skip
the gradient reduction: thunder's ``skip_data_parallel_grad_sync``, DDP's ``no_sync``, FSDP2's
``set_requires_gradient_sync(False)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from teparity.inrank import fp8state, sides
from teparity.inrank.fsdp_transform import fully_shard_model, gather_shard
from teparity.inrank.sides import (
    ThunderStyleAccumulation,
    _device,
    _grad_output,
    _input,
    _model,
    _thunder_snapshot,
    eager_module,
    te_scale_update,
    thunder_no_sync,
)
from teparity.inrank.syncspy import record_fp8_syncs
from teparity.records import CaseRun, PairSpec, ScaleUpdate, Side, StepRecord
from teparity.stack import recipes
from teparity.stack.executors import find_te_executors
from teparity.stack.te_api import te_autocast
from teparity.stack.thunder_api import jit_fsdp, jit_options


def run_eager_fsdp(rank: int, world_size: int, spec: PairSpec, scale_update: ScaleUpdate = "fused") -> list[CaseRun]:
    """Eager TE under the spec's reference (torch FSDP2 or torch DDP) on this rank, on TE's ``scale_update`` path."""
    with te_scale_update(scale_update):
        return _run_side("eager", rank, world_size, spec)


def run_thunder_fsdp(rank: int, world_size: int, spec: PairSpec) -> list[CaseRun]:
    """thunder fsdp + ``spec.executor`` on this rank."""
    return _run_side("thunder", rank, world_size, spec)


def _run_side(side: Side, rank: int, world_size: int, spec: PairSpec) -> list[CaseRun]:
    if spec.fsdp not in ("ZERO2", "ZERO3"):
        raise ValueError(f"an FSDP side needs spec.fsdp ZERO2 or ZERO3, not {spec.fsdp!r}")
    return sides._run_side(side, rank, world_size, spec, _run_case)


def _mesh() -> Any:
    """A 1-D mesh over the world's existing group (no new group), on the device the ranks use."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(dist.group.WORLD, "cuda")


def _run_case(side: Side, spec: PairSpec, run: CaseRun, rank: int, group: Any) -> None:
    import torch

    from teparity.inrank.models import linear_names

    case = run.case
    device = _device()
    recipe = recipes.build(spec.recipe_id)
    plain = _model(case, device)
    run.linear_names = linear_names(plain)
    info = find_te_executors()[spec.executor]
    choose, state_module = (lambda recipe, synced: None), None
    if side == "eager":
        module = eager_module(plain, spec, group, case)
        model, parameters, full, sync, finish = _eager_reference(module, spec)
        if spec.model is not None:
            choose, state_module, parameters = module.choose, module.state_module, dict(module.trained().named_parameters())
        if spec.input_grad_as_weight_grad:
            choose = _stashing_input_grads(module, choose)
        autocast = lambda: te_autocast(recipe, group)  # noqa: E731
    else:
        model, parameters, full, sync, finish = _thunder_fsdp(plain, spec, info, recipe, device)
        # As in sides: the legacy executor wraps its forward in fp8_autocast itself.
        autocast = (lambda: contextlib.nullcontext()) if spec.executor == "legacy" else (lambda: te_autocast(recipe, group))

    optimizer = torch.optim.SGD(list(parameters.values()), lr=spec.lr)
    with record_fp8_syncs(None) as syncs:
        for step in range(spec.steps):
            before = syncs.backward_calls()
            outputs, input_grads = [], []
            with contextlib.ExitStack() as accumulating:  # one span of micro-batches without the reduction
                if spec.micro_batches > 1:
                    accumulating.enter_context(sync(False))
                for micro in range(spec.micro_batches):
                    last = micro == spec.micro_batches - 1
                    if last:
                        accumulating.close()
                    # A no-sync backward of thunder's FSDP stashes the unsharded parameter gradients and returns none,
                    # an input's neither (``stash_unsharded_grads_and_return_none_as_grads``): only the last micro-batch's
                    # input requires grad, on both sides.
                    x = _input(case, step=step, micro=micro, rank=rank, device=device, requires_grad=last)
                    choose(recipe, last)
                    with autocast():
                        y = model(x)
                    y.backward(_grad_output(case, step=step, micro=micro, rank=rank, device=device).to(y.dtype))
                    outputs.append(y.detach().float().cpu())
                    input_grads.append(None if x.grad is None else x.grad.detach().float().cpu())
            finish()
            torch.cuda.synchronize()
            # Sorted: each gather is a collective, in the same order on every rank.
            grads = {n: full(n, p.grad).detach().float().cpu().clone() for n, p in sorted(parameters.items())
                     if p.grad is not None}
            if side == "eager":
                state = fp8state.eager_snapshot(state_module() if state_module else model)
            else:
                state = _thunder_snapshot(run, model, rank, info, recipe, spec)
            run.steps.append(StepRecord(outputs, input_grads, grads, state, syncs.backward_calls() - before))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    run.sync_mode = syncs.mode


def _stashing_input_grads(module: Any, choose: Callable[[Any, bool], None]) -> Callable[[Any, bool], None]:
    """``choose`` that also tells ``defect_models.InputGradAsWeightGrad`` over ``module`` whether the micro-batch reduces."""
    from teparity.inrank.defect_models import InputGradAsWeightGrad

    stash = InputGradAsWeightGrad(module)

    def both(recipe: Any, synced: bool) -> None:
        stash.choose(synced)
        choose(recipe, synced)

    return both


Program = tuple[Any, dict[str, Any], Callable[[str, Any], Any], Callable[[bool], Any], Callable[[], None]]


def _eager_reference(module: Any, spec: PairSpec) -> Program:
    """The eager side: the ``te.Linear`` twins (or a defect model of them: ``sides.eager_module``) under the spec's
    reference (module docstring); the model, the parameters it steps, how a gradient becomes full, and the context
    of a micro-batch (its gradient reduced, or not)."""
    import torch

    if spec.fsdp_reference == "ddp":
        device_ids = [torch.cuda.current_device()] if torch.distributed.get_backend() == "nccl" else None
        model: Any = torch.nn.parallel.DistributedDataParallel(module, device_ids=device_ids)
        trained = module.trained() if spec.model is not None else module
        accumulation = ThunderStyleAccumulation(model, dict(trained.named_parameters()))
        sync = lambda reduce: contextlib.nullcontext() if reduce else accumulation.span()  # noqa: E731
        return model, dict(model.module.named_parameters()), lambda name, grad: grad, sync, accumulation.finish
    if spec.model is not None:
        raise NotImplementedError(f"the defect model {spec.model} under torch FSDP2: the fsdp tier models defects against "
                                  "its DDP reference only (gloo ranks sharing a GPU)")
    model = fully_shard_model(module, spec.fsdp, mesh=_mesh(), keep_attributes=True)

    @contextlib.contextmanager
    def sync(reduce: bool) -> Iterator[None]:
        model.set_requires_gradient_sync(reduce)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)

    return model, dict(model.named_parameters()), lambda name, grad: grad.full_tensor(), sync, lambda: None


def _thunder_fsdp(plain: Any, spec: PairSpec, info: Any, recipe: Any, device: str) -> Program:
    """The thunder side: thunder's FSDP of the jitted model, its shards gathered to full gradients."""
    shapes = {name: tuple(p.shape) for name, p in plain.named_parameters()}
    model = jit_fsdp(plain, jit_options(info, recipe), spec.fsdp, device, spec.fsdp_bucketing)
    parameters = {name: model.get_parameter(name) for name in shapes}
    sync = lambda reduce: contextlib.nullcontext() if reduce else thunder_no_sync(model)()  # noqa: E731
    return model, parameters, lambda name, grad: gather_shard(grad, shapes[name]), sync, lambda: None
