"""Under thunder's DDP, thunder keys its cache on skip_data_parallel_grad_sync: a micro-batch without the gradient
all-reduce compiles a cache entry with TE FP8 state of its own (new recipe states for the functional executor, new
TELinears for the legacy one), so the synced micro-batch quantizes with a state that never saw the earlier micro-batches'
amaxes, where eager TE's micro-batches share one state. 2 gloo ranks on one GPU, a bf16 MLP of 2 linears, one step of 2
micro-batches (the first under skip_data_parallel_grad_sync), eager te.Linear, then thunder.jit with the functional
executor first (the legacy one where there is none). Needs an FP8 GPU (compute capability 8.9 or newer) and TE. Run it
as is (it spawns its ranks) or under `torchrun --nproc-per-node 2`."""
import contextlib
import importlib.metadata
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from packaging.version import Version

#: The TE executors (module, attribute, what the module defines), the functional one first, newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2"),
              ("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")]
WORLD, SIZES, BATCH, MICRO_BATCHES = 2, (32, 64, 16), 16, 2


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def find_executor() -> tuple:
    """(the executor, its transform class: None for the legacy one), or (None, why there is none)."""
    for module_name, attribute, marker in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker):
            if (executor := getattr(module, attribute)) is None:
                return None, f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine"
            return executor, None if marker == "TELinear" else getattr(module, marker)
    return None, "this thunder has no TE executor"


def autocast(te, recipe):
    return te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)


def forward_passes(trace):
    """The non-zero rows of the first TE linear's input amax history, in thunder's forward trace (None: TE holds none)."""
    for bsym in trace.bound_symbols:
        if bsym.sym.name.startswith("te_linear_"):  # legacy: a TELinear module per linear
            return int(bsym._call_ctx[bsym.sym.name].func.fp8_meta["scaling_fwd"].amax_history[:, 0].ne(0).sum())
        if bsym.sym.name == "te_functional_linear_fwd":  # functional: the recipe state behind its input quantizer
            made = {out.name: b for b in trace.bound_symbols for out in b.flat_proxy_outs}
            state = made[made[bsym.args[3].name].args[0].name]
            return int(state._call_ctx[state.sym.name].state.amax_history[:, 0].ne(0).sum())
    return None


def rank_main(rank: int, init: str, results: "mp.SimpleQueue | None") -> None:
    import thunder
    import thunder.distributed as td
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling
    from transformer_engine.pytorch.fp8 import FP8GlobalStateManager  # .quantization's, from TE 2.9

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    recipe = DelayedScaling()
    torch.manual_seed(0)
    plain = torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:]))).to("cuda", torch.bfloat16)
    xs = [torch.randn(BATCH, SIZES[0], generator=torch.Generator().manual_seed(100 * rank + micro)).to("cuda", torch.bfloat16)
          for micro in range(MICRO_BATCHES)]
    eager = torch.nn.Sequential(*(te.Linear(m.in_features, m.out_features, params_dtype=torch.bfloat16, device="cuda")
                                  for m in plain))
    eager.load_state_dict(plain.state_dict(), strict=False)  # the same weights (TE's own _extra_state aside)
    eager_outputs = []
    for x in xs:  # the gradient all-reduce (torch DDP's no_sync) does not touch the FP8 state: left out here
        with autocast(te, recipe):
            y = eager(x)
        y.float().sum().backward()
        eager_outputs.append(y.detach().float())
    eager_forwards = int(eager[0].fp8_meta["scaling_fwd"].amax_history[:, 0].ne(0).sum())
    FP8GlobalStateManager.reset()  # TE's global amax buffers: the thunder side starts as the eager side did
    executor, transform = find_executor()
    kind = "legacy" if transform is None else "functional"
    options = {"executors": [executor, *thunder.get_default_executors()]}
    if transform is not None:  # functional: its transform, and TE's autocast around the call
        options["transforms"], fp8 = [transform()], lambda: autocast(te, recipe)
    else:  # the recipe goes to thunder.jit: the legacy executor wraps its forward in fp8_autocast itself
        options["te_fp8_recipe"], fp8 = recipe, contextlib.nullcontext
    try:
        ddp_of_jitted = Version(importlib.metadata.version("lightning-thunder")) >= Version("0.2.0.dev20240811")
        jitted = (td.ddp(thunder.jit(plain, **options), broadcast_from=None) if ddp_of_jitted  # the same weights: no broadcast
                  else thunder.jit(td.ddp(plain, broadcast_from=None), **options))  # before dev20240811: jit(ddp(module))
        differences = []
        for micro, x in enumerate(xs):  # all but the last micro-batch without the gradient all-reduce
            with td.skip_data_parallel_grad_sync() if micro < MICRO_BATCHES - 1 else contextlib.nullcontext():
                with fp8():
                    y = jitted(x)
                y.float().sum().backward()
            differences.append((y.detach().float() - eager_outputs[micro]).abs().max().item())
        forwards = forward_passes(thunder.last_traces(jitted)[-1])  # the entry that ran last: the synced one
        outcome = (kind, thunder.cache_misses(jitted), eager_forwards, forwards, differences, None)
    except Exception as error:  # noqa: BLE001
        outcome = (kind, None, eager_forwards, None, None, f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
    if rank == 0:
        results.put(outcome) if results is not None else print_verdict(outcome)
    dist.destroy_process_group()


def print_verdict(outcome: tuple) -> None:
    """Exit 0 where the synced micro-batch's cache entry recorded fewer forward passes than eager TE's one state."""
    import transformer_engine

    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    kind, entries, eager, jitted, differences, error = outcome
    print(f"rank 0, {kind} executor: thunder compiled {entries} cache entries; forward passes in the first linear's "
          f"step-0 input amax history: eager TE {eager}, thunder (the synced micro-batch's entry) {jitted}; "
          f"max |thunder - eager TE| of each micro-batch's output: {differences}")
    if error or jitted is None:
        sys.exit(print("NOT REPRODUCED: another defect: " + (f"thunder raised {error}" if error else "TE holds no linear "
                                                             "in thunder's forward trace (torch ran them)")) or 1)
    if entries == MICRO_BATCHES and jitted < eager:
        print(f"REPRODUCED: the synced micro-batch ran in a cache entry of its own whose FP8 state recorded {jitted} of "
              f"the step's {eager} forward passes (eager TE's one state: {eager}); its output parts from eager TE's "
              f"by up to {differences[-1]:.3g}")
        sys.exit(0)
    sys.exit(print("NOT REPRODUCED: " + ("the synced micro-batch's FP8 state saw every micro-batch, as eager TE's"
                                         if jitted == eager else "another defect")) or 1)


if __name__ == "__main__":
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    try:
        import thunder  # noqa: F401
        import transformer_engine.pytorch  # noqa: F401
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    if (found := find_executor())[0] is None:
        cannot(found[1])
    if "RANK" in os.environ:  # under torchrun
        rank_main(int(os.environ["RANK"]), "env://", None)
    else:
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(rank_main, args=("file://" + tempfile.mktemp(prefix="repro-"), queue), nprocs=WORLD)
        print_verdict(queue.get())
