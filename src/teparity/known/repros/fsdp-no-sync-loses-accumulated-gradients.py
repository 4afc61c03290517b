"""Under thunder's FSDP, gradients accumulated inside ThunderModule.no_sync() are lost: after a no-sync micro-batch and
a synced one, each parameter's gradient is the last micro-batch's alone. No TransformerEngine needed: 2 gloo ranks on
the CPU, a 2-layer MLP, the gradients gathered and compared with the analytic ones (the mean over ranks of the sum over
micro-batches). Run it as is (it spawns its ranks) or under `torchrun --nproc-per-node 2`."""
import importlib.metadata
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from packaging.version import Version

WORLD, SIZES, BATCH = 2, (32, 64, 16), 8


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])))


def data(rank: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * rank + micro)
    return torch.randn(BATCH, SIZES[0], generator=g), torch.randn(BATCH, SIZES[-1], generator=g)


def expected(micros: range) -> dict[str, torch.Tensor]:
    """The mean over ranks of the gradients summed over ``micros``, in plain torch."""
    m = net()
    for rank in range(WORLD):
        for micro in micros:
            x, grad_out = data(rank, micro)
            m(x).backward(grad_out)
    return {name: p.grad / WORLD for name, p in m.named_parameters()}


def gathered(shard: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    full = torch.empty((shard.shape[0] * WORLD, *shard.shape[1:]))
    dist.all_gather_into_tensor(full, shard.detach().contiguous())
    return full[: shape[0]].reshape(shape)


def rank_main(rank: int, init: str, results: "mp.SimpleQueue | None") -> None:
    import thunder
    import thunder.distributed as td

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    if Version(importlib.metadata.version("lightning-thunder")) >= Version("0.2.0.dev20240811"):
        jitted = td.fsdp(thunder.jit(net()), broadcast_from=None, device=torch.device("cpu"))
    else:
        jitted = thunder.jit(td.fsdp(net(), broadcast_from=None, device=torch.device("cpu")))
    shapes = {name: p.shape for name, p in net().named_parameters()}
    with jitted.no_sync():  # micro-batch 0: accumulate, do not reduce
        x, grad_out = data(rank, 0)
        jitted(x).backward(grad_out)
    x, grad_out = data(rank, 1)  # micro-batch 1: reduce what accumulated
    jitted(x).backward(grad_out)
    grads = {name: gathered(jitted.get_parameter(name).grad, shape) for name, shape in shapes.items()}
    if rank == 0:
        both, last = expected(range(2)), expected(range(1, 2))
        report = {name: ((g - both[name]).abs().max().item(), (g - last[name]).abs().max().item()) for name, g in grads.items()}
        results.put(report) if results is not None else print_verdict(report)
    dist.destroy_process_group()


def print_verdict(report: dict[str, tuple[float, float]]) -> None:
    """Exit 0 where the no-sync gradients were lost, 1 where they accumulated."""
    worst_both = max(d for d, _ in report.values())
    worst_last = max(d for _, d in report.values())
    import thunder

    print(f"thunder {importlib.metadata.version('lightning-thunder')}, torch {torch.__version__}")
    for name, (both, last) in report.items():
        print(f"{name}: max |grad - expected| {both:.3g}; max |grad - last micro-batch's alone| {last:.3g}")
    if worst_last < 1e-5 < worst_both:
        print(f"REPRODUCED: every gradient is the last micro-batch's alone (within {worst_last:.1e}); the no-sync "
              f"micro-batch's are lost (up to {worst_both:.3g} from the accumulated ones)")
        sys.exit(0)
    if worst_both < 1e-5:
        print(f"NOT REPRODUCED: every gradient is the accumulated one (within {worst_both:.1e})")
        sys.exit(1)
    print(f"NOT REPRODUCED: the gradients are neither the accumulated ones ({worst_both:.3g} off) nor the last "
          f"micro-batch's ({worst_last:.3g} off): another defect")
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
