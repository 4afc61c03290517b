"""thunder's DDP transform raises on an input that requires grad: looking for the all-reduce behind every gradient the
backward returns, it meets the input's gradient, which has none (ValueError: <CollectionProxy ...> had an unexpected
type, in get_bsym_of_allreduce_of_grad). No TransformerEngine needed: 2 gloo ranks on the CPU, a 2-layer MLP, one
step with the input requiring grad, its gradients compared with torch DDP's. Run it as is (it spawns its ranks) or
under `torchrun --nproc-per-node 2`."""
import importlib.metadata
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from packaging.version import Version

WORLD, SIZES, BATCH = 2, (32, 64, 16), 8


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])))


def data(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * rank)
    return torch.randn(BATCH, SIZES[0], generator=g), torch.randn(BATCH, SIZES[-1], generator=g)


def step(module: torch.nn.Module, rank: int) -> dict[str, torch.Tensor]:
    """One forward and backward with an input that requires grad: the input's and the parameters' gradients."""
    x, grad_out = data(rank)
    x.requires_grad_(True)
    module(x).backward(grad_out)
    return {"input": x.grad, **{name.removeprefix("module."): p.grad for name, p in module.named_parameters()}}


def rank_main(rank: int, init: str, results: "mp.SimpleQueue | None") -> None:
    import thunder
    import thunder.distributed as td

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    reference = step(torch.nn.parallel.DistributedDataParallel(net()), rank)
    try:
        if Version(importlib.metadata.version("lightning-thunder")) >= Version("0.2.0.dev20240811"):
            jitted = td.ddp(thunder.jit(net()), broadcast_from=None)
        else:
            jitted = thunder.jit(td.ddp(net(), broadcast_from=None))
        got = step(jitted, rank)
        outcome = ("ran", max((got[n] - reference[n]).abs().max().item() for n in reference))
    except Exception as error:  # noqa: BLE001
        frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
        outcome = ("raised", f"{type(error).__name__}: {str(error)[:200]}", frames[-3:])
    if rank == 0:
        results.put(outcome) if results is not None else print_verdict(outcome)
    dist.destroy_process_group()


def print_verdict(outcome: tuple) -> None:
    """Exit 0 where the transform raised on the input's gradient, 1 where it ran."""
    import thunder

    print(f"thunder {importlib.metadata.version('lightning-thunder')}, torch {torch.__version__}")
    if outcome[0] == "raised":
        print(f"raised {outcome[1]} in {' <- '.join(reversed(outcome[2]))}")
        if "CollectionProxy" in outcome[1] and "get_bsym_of_allreduce_of_grad" in outcome[2]:
            print("REPRODUCED: thunder's DDP transform raises on an input that requires grad")
            sys.exit(0)
        print("NOT REPRODUCED: it raised, but not where this defect raises")
        sys.exit(1)
    verdict = "every gradient matches torch DDP's" if outcome[1] < 1e-5 else "another defect: the gradients part"
    print(f"NOT REPRODUCED: it ran; {verdict} (max |thunder - torch DDP| {outcome[1]:.3g}, input's included)")
    sys.exit(1)


if __name__ == "__main__":
    try:
        import thunder  # noqa: F401
    except Exception as error:  # noqa: BLE001
        print(f"CANNOT RUN HERE: lightning-thunder does not import: {error}")
        sys.exit(2)
    if "RANK" in os.environ:  # under torchrun
        rank_main(int(os.environ["RANK"]), "env://", None)
    else:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(rank_main, args=("file://" + tempfile.mktemp(prefix="repro-"), queue), nprocs=WORLD)
        print_verdict(queue.get())
