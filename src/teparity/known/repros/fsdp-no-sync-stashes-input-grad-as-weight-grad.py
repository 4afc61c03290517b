"""Under thunder's FSDP, a no-sync backward through the functional TE executor stashes a linear's input gradient as its
weight's: under skip_data_parallel_grad_sync (what ThunderModule.no_sync enters) stash_unsharded_grads_and_return_none_
as_grads keeps each parameter's unsharded gradient as the first output of the symbol that produced it, and the
functional executor's weight gradient comes out of its backward FP8 update (_te_fp8_amax_and_scale_update, tokens=
(grad_input, grad_weight)), whose first output is the input's gradient; leaving no_sync reduce-scatters it into the
weight's gradient, silently. A bf16 MLP of 2 linears with biases (32-64-16, batch 16: the second linear's input gradient
has its weight's shape) under thunder.distributed.fsdp on 2 gloo ranks sharing one GPU, one micro-batch without the
sync (its input needs no grad) under TE's FP8 autocast: each stashed gradient (_thunder_fsdp_unsharded_grad) against
eager TE's (te.Linear) of the same micro-batch and rank. Needs an FP8 GPU (compute capability 8.9 or newer) and TE.
Run it as is (it spawns its ranks) or under `torchrun --nproc-per-node 2`."""
import importlib.metadata
import os
import re
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD, SIZES, BATCH, SAME, APART = 2, (32, 64, 16), 16, 0.15, 0.5  # SAME/APART: relative distances (norms)
#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def functional_executor() -> tuple:
    """(the executor, its transform class), or (None, why) where this thunder has none to run."""
    for module_name, attribute, transform in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, transform):
            executor = getattr(module, attribute)
            return (executor, getattr(module, transform)) if executor is not None else (None, f"{module_name}.{attribute} is None")
    return None, "this thunder has no functional TE executor"


def eager_te(te, net: torch.nn.Module, x: torch.Tensor, grad_out: torch.Tensor, fp8) -> tuple[dict, torch.Tensor]:
    """te.Linear twins of ``net``'s linears (same weights), one micro-batch: their gradients, and the second linear's
    input's gradient."""
    twins = []
    for layer in net:
        twin = te.Linear(layer.in_features, layer.out_features, bias=True, params_dtype=torch.bfloat16, device=x.device)
        with torch.no_grad():
            twin.weight.copy_(layer.weight)
            twin.bias.copy_(layer.bias)
        twins.append(twin)
    with fp8():
        hidden = twins[0](x)
        hidden.retain_grad()
        y = twins[1](hidden)
    y.backward(grad_out)
    return {f"{i}.{name}": p.grad.float() for i, twin in enumerate(twins) for name, p in twin.named_parameters()}, hidden.grad.float()


def distance(a: torch.Tensor, b: torch.Tensor) -> float:
    return float("inf") if a.shape != b.shape else ((a.float() - b).norm() / b.norm()).item()


def rank_main(rank: int, init: str, results: "mp.SimpleQueue | None") -> None:
    import thunder
    import thunder.distributed as td
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    recipe = DelayedScaling()
    fp8 = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    torch.manual_seed(0)
    net = torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:]))).to(device, torch.bfloat16)
    g = torch.Generator().manual_seed(100 * rank)
    x, grad_out = (torch.randn(BATCH, n, generator=g).to(device, torch.bfloat16) for n in (SIZES[0], SIZES[-1]))
    eager, input_grad = eager_te(te, net, x, grad_out, fp8)
    executor, transform = functional_executor()
    options = {"executors": [executor, *thunder.get_default_executors()], "transforms": [transform()]}
    try:
        jitted = td.fsdp(thunder.jit(net, **options), broadcast_from=None, device=device)
        with td.skip_data_parallel_grad_sync():  # as inside ThunderModule.no_sync, before it reduce-scatters the stash
            with fp8():
                y = jitted(x)
            y.backward(grad_out)
        held = len(re.findall(r"\bte_functional_linear_fwd\(", str(thunder.last_traces(jitted)[-1])))
        stash = {name: getattr(jitted._model.get_parameter(name), "_thunder_fsdp_unsharded_grad", None) for name in eager}
        outcome = (held, {name: None if s is None else (distance(s, eager[name]), distance(s, input_grad))
                          for name, s in stash.items()})
    except Exception as error:  # noqa: BLE001
        outcome = ("raised", f"{type(error).__name__}: {str(error)[:300]}")
    if rank == 0:
        results.put(outcome) if results is not None else print_verdict(outcome)
    dist.destroy_process_group()


def print_verdict(outcome: tuple) -> None:
    """Exit 0 where the second linear's weight stashed its input's gradient and the rest eager TE's gradients, else 1."""
    import transformer_engine

    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, "
          f"torch {torch.__version__}")
    if outcome[0] == "raised":
        print(f"NOT REPRODUCED: thunder raised in the no-sync micro-batch (another defect): {outcome[1]}")
        sys.exit(1)
    held, report = outcome
    print(f"TE held {held} of {len(SIZES) - 1} linears in thunder's forward")
    for name, got in report.items():
        print(f"{name}: " + ("nothing stashed" if got is None else f"its stashed gradient is {got[0]:.3g} (relative) from "
                             f"eager TE's gradient of {name}" + (f", {got[1]:.3g} from the second linear's input gradient"
                                                                 if got[1] != float("inf") else "")))
    if all(got is None for got in report.values()):
        print("NOT REPRODUCED: thunder stashed no gradient in the no-sync micro-batch (dropped: another defect)")
        sys.exit(1)
    weight, rest = report["1.weight"], [got for name, got in report.items() if name != "1.weight"]
    rest_exact = all(got is not None and got[0] < SAME for got in rest)
    if weight is not None and weight[1] < SAME < APART < weight[0] and rest_exact:
        print(f"REPRODUCED: 1.weight's stashed gradient is the second linear's input gradient ({weight[1]:.3g} from "
              f"eager TE's; {weight[0]:.3g} from its weight gradient), the other parameters' are eager TE's gradients")
        sys.exit(0)
    if weight is not None and weight[0] < SAME and rest_exact:
        print(f"NOT REPRODUCED: every stashed gradient is eager TE's gradient of its parameter (within {SAME} relative)")
        sys.exit(1)
    print("NOT REPRODUCED: the stashed gradients above are not this defect's (another defect)")
    sys.exit(1)


if __name__ == "__main__":
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    try:
        import thunder  # noqa: F401
        import thunder.distributed  # noqa: F401
        import transformer_engine.pytorch  # noqa: F401
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    if functional_executor()[0] is None:
        cannot(functional_executor()[1])
    if "RANK" in os.environ:  # under torchrun
        rank_main(int(os.environ["RANK"]), "env://", None)
    else:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(rank_main, args=("file://" + tempfile.mktemp(prefix="repro-"), queue), nprocs=WORLD)
        print_verdict(queue.get())
