"""Under thunder's FSDP, a no-sync backward through the legacy TE executor fails to compile. In a micro-batch under
skip_data_parallel_grad_sync (what ThunderModule.no_sync enters) thunder replaces each parameter's gradient
reduce-scatter with a stash of the unsharded gradient (stash_unsharded_grads_and_return_none_as_grads), keyed by the
symbol that produced it and taking that symbol's first output; the legacy executor's te_functional_linear_backward
returns the input's, the weight's and the bias's gradients from one symbol, so the bias's entry is overwritten and its
reduce-scatter deleted while the backward's return still names it: KeyError on that proxy, in dce or in the trace
interpreter's read, while split_forward_backward prepares the backward. A bf16 MLP of 2 linears with biases under
thunder.distributed.fsdp on 2 gloo ranks sharing one GPU, one micro-batch without the gradient sync. Needs an FP8 GPU
(compute capability 8.9 or newer) and TransformerEngine. Run it as is (it spawns its ranks) or under
`torchrun --nproc-per-node 2`."""
import importlib.metadata
import os
import re
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from packaging.version import Version

WORLD, SIZES, BATCH = 2, (32, 64, 16), 16
#: Where the legacy executor lives (module, attribute; its module defines TELinear), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex")]


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def legacy_executor():
    """The legacy TE executor of this thunder, or None where it has none (removed in 0.2.7.dev20251130)."""
    for module_name, attribute in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, "TELinear"):
            return getattr(module, attribute)
    return None


def rank_main(rank: int, init: str, results: "mp.SimpleQueue | None") -> None:
    import thunder
    import thunder.distributed as td
    from transformer_engine.common.recipe import DelayedScaling

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    net = torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:]))).to(device, torch.bfloat16)
    # The legacy executor wraps its forward in fp8_autocast itself, with the recipe given to thunder.jit.
    options = {"executors": [legacy_executor(), *thunder.get_default_executors()], "te_fp8_recipe": DelayedScaling()}
    if Version(importlib.metadata.version("lightning-thunder")) >= Version("0.2.0.dev20240811"):
        jitted = td.fsdp(thunder.jit(net, **options), broadcast_from=None, device=device)
    else:  # the 2024 builds before it take jit(fsdp(net)) only
        jitted = thunder.jit(td.fsdp(net, broadcast_from=None, device=device), **options)
    g = torch.Generator().manual_seed(100 * rank)
    x, grad_out = (torch.randn(BATCH, n, generator=g).to(device, torch.bfloat16) for n in (SIZES[0], SIZES[-1]))
    try:
        with td.skip_data_parallel_grad_sync():  # the micro-batch's first call compiles its no-sync backward
            jitted(x).backward(grad_out)
        held = len(re.findall(r"\bte_linear_\d+\(", str(thunder.last_traces(jitted)[-1])))
        names = [name for name, _ in net.named_parameters()]
        stashed = [n for n in names if hasattr(jitted._model.get_parameter(n), "_thunder_fsdp_unsharded_grad")]
        outcome = ("ran", held, len(stashed), len(names))
    except Exception as error:  # noqa: BLE001
        frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
        outcome = ("raised", f"{type(error).__name__}: {str(error)[:200]}", frames)
    if rank == 0:
        results.put(outcome) if results is not None else print_verdict(outcome)
    dist.destroy_process_group()


def print_verdict(outcome: tuple) -> None:
    """Exit 0 where the no-sync micro-batch raised KeyError on a proxy while its backward was prepared, 1 otherwise."""
    import transformer_engine

    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, "
          f"torch {torch.__version__}")
    if outcome[0] == "raised":
        _, error, frames = outcome
        print(f"the no-sync micro-batch raised {error} in {' <- '.join(reversed(frames[-8:]))}")
        if (re.match(r"KeyError: 't\d+'", error) and {"split_forward_backward", "transform_for_execution"} <= set(frames)
                and {"dce", "read"} & set(frames)):
            print(f"REPRODUCED: thunder's FSDP no-sync backward through the legacy TE executor fails to compile ({error} "
                  f"in {'dce' if 'dce' in frames else 'read'}, under split_forward_backward)")
            sys.exit(0)
        print("NOT REPRODUCED: it raised, but not where this defect raises (another defect)")
        sys.exit(1)
    _, held, stashed, params = outcome
    lost = " (nothing stashed: the no-sync gradients are dropped, another defect)" if stashed == 0 else ""
    print(f"NOT REPRODUCED: the no-sync micro-batch compiled and ran; TE held {held} of {len(SIZES) - 1} linears, "
          f"{stashed} of {params} parameters stashed their unsharded gradient{lost}")
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
    if legacy_executor() is None:
        cannot("this thunder has no legacy TE executor")
    if "RANK" in os.environ:  # under torchrun
        rank_main(int(os.environ["RANK"]), "env://", None)
    else:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(rank_main, args=("file://" + tempfile.mktemp(prefix="repro-"), queue), nprocs=WORLD)
        print_verdict(queue.get())
