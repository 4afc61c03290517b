"""thunder's FSDP transform with LAYER or BLOCK bucketing raises on an input that requires grad: its reduce-scatter
bucketing maps every gradient the backward returns to a parameter's bucket, the input's too (RuntimeError: Invalid
index=0, in create_map_from_unsharded_grad_to_bucket). No TransformerEngine needed: 2 gloo ranks on the CPU, a 2-layer
MLP, one step under each bucketing strategy with the input requiring grad, the gathered gradients compared with the
analytic ones. Run it as is (it spawns its ranks) or under `torchrun --nproc-per-node 2`."""
import importlib.metadata
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from packaging.version import Version

WORLD, SIZES, BATCH, BUCKETINGS = 2, (32, 64, 16), 8, ("NONE", "LAYER", "BLOCK")


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])))


def data(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * rank)
    return torch.randn(BATCH, SIZES[0], generator=g), torch.randn(BATCH, SIZES[-1], generator=g)


def expected() -> dict[str, torch.Tensor]:
    """The parameters' gradients averaged over the ranks, in plain torch."""
    m = net()
    for rank in range(WORLD):
        x, grad_out = data(rank)
        m(x).backward(grad_out)
    return {name: p.grad / WORLD for name, p in m.named_parameters()}


def gathered(shard: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    full = torch.empty((shard.shape[0] * WORLD, *shard.shape[1:]))
    dist.all_gather_into_tensor(full, shard.detach().contiguous())
    return full[: shape[0]].reshape(shape)


def one_step(rank: int, bucketing: str) -> tuple:
    import thunder
    import thunder.distributed as td

    options = dict(sharding_strategy=td.FSDPType.ZERO2, bucketing_strategy=td.FSDPBucketingStrategy[bucketing],
                   broadcast_from=None, device=torch.device("cpu"))
    try:
        if Version(importlib.metadata.version("lightning-thunder")) >= Version("0.2.0.dev20240811"):
            jitted = td.fsdp(thunder.jit(net()), **options)
        else:
            jitted = thunder.jit(td.fsdp(net(), **options))
        x, grad_out = data(rank)
        x.requires_grad_(True)
        jitted(x).backward(grad_out)
    except Exception as error:  # noqa: BLE001
        frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
        return ("raised", f"{type(error).__name__}: {str(error)[:160]}", frames[-3:])
    want = expected()
    grads = {name: gathered(jitted.get_parameter(name).grad, want[name].shape) for name in want}
    return ("ran", max((grads[name] - want[name]).abs().max().item() for name in want))


def rank_main(rank: int, init: str, results: "mp.SimpleQueue | None") -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    outcomes = {bucketing: one_step(rank, bucketing) for bucketing in BUCKETINGS}
    if rank == 0:
        results.put(outcomes) if results is not None else print_verdict(outcomes)
    dist.destroy_process_group()


def print_verdict(outcomes: dict[str, tuple]) -> None:
    """Exit 0 where LAYER and BLOCK raise in the bucketing map and NONE runs, 1 otherwise."""
    import thunder

    print(f"thunder {importlib.metadata.version('lightning-thunder')}, torch {torch.__version__}")
    for bucketing, outcome in outcomes.items():
        said = f"raised {outcome[1]} in {' <- '.join(reversed(outcome[2]))}" if outcome[0] == "raised" else \
            f"ran; max |gradient - expected| {outcome[1]:.3g}"
        print(f"bucketing {bucketing}: {said}")
    rejects = [b for b in ("LAYER", "BLOCK") if outcomes[b][0] == "raised" and "Invalid index" in outcomes[b][1]
               and "create_map_from_unsharded_grad_to_bucket" in outcomes[b][2]]
    if rejects and outcomes["NONE"][0] == "ran":
        print(f"REPRODUCED: FSDP with {' and '.join(rejects)} bucketing raises on an input that requires grad; NONE runs")
        sys.exit(0)
    exact = all(o[0] == "ran" and o[1] < 1e-5 for o in outcomes.values())
    print("NOT REPRODUCED: " + ("every bucketing runs and matches the expected gradients" if exact else
                                "the outcomes above are not this defect's"))
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
