"""thunder's TE executor (EXECUTOR: legacy or functional) reduces FP8 amaxes over the world where eager TE reduces
them within the fp8 group: the legacy executor wraps its forward in fp8_autocast(fp8_recipe=...), no fp8_group; the
functional one all-reduces each amax history over the default process group, ignoring the caller's autocast group.
2 gloo ranks on one GPU, each its own fp8 group, rank 1's input twice rank 0's; a bf16 MLP of 2 linears, one training
step of eager te.Linear under TE's autocast with the rank's group, then of thunder.jit with the executor first: the
first linear's input amax says over which ranks each side reduced. Needs an FP8 GPU (compute capability 8.9 or
newer) and TE. Run it as is (it spawns its ranks) or under `torchrun --nproc-per-node 2`."""
import contextlib
import importlib.metadata
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

#: The executor under test: "legacy" or "functional".
EXECUTOR = "legacy"
#: Where the executor lives (module, attribute, what its module defines), newest thunder first.
CANDIDATES = {
    "legacy": [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
               ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")],
    "functional": [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
                   ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")],
}
WORLD, SIZES, BATCH = 2, (32, 64, 16), 16


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def find_executor() -> tuple:
    """(the executor, its module's marker class), or (None, why there is none)."""
    for module_name, attribute, marker in CANDIDATES[EXECUTOR]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker):
            if (executor := getattr(module, attribute)) is None:
                return None, f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine"
            return executor, getattr(module, marker)
    return None, f"this thunder has no {EXECUTOR} TE executor"


def autocast(te, recipe, group):
    if hasattr(te, "autocast"):
        return te.autocast(enabled=True, recipe=recipe, amax_reduction_group=group)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe, fp8_group=group)


def input_amax(trace):
    """The input amax in the history of the first TE linear of thunder's forward trace (None: TE holds no linear)."""
    for bsym in trace.bound_symbols:
        if bsym.sym.name.startswith("te_linear_"):  # legacy: a TELinear module per linear
            history = bsym._call_ctx[bsym.sym.name].func.fp8_meta["scaling_fwd"].amax_history
            return history[:, 0].max().item()
        if bsym.sym.name == "te_functional_linear_fwd":  # functional: the recipe state behind its input quantizer
            made = {out.name: b for b in trace.bound_symbols for out in b.flat_proxy_outs}
            state = made[made[bsym.args[3].name].args[0].name]
            return state._call_ctx[state.sym.name].state.amax_history[:, 0].max().item()
    return None


def rank_main(rank: int, init: str, results: "mp.SimpleQueue | None") -> None:
    import thunder
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling
    from transformer_engine.pytorch.fp8 import FP8GlobalStateManager  # .quantization's, from TE 2.9

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    group = [dist.new_group([r]) for r in range(WORLD)][rank]  # each rank its own fp8 group
    recipe = DelayedScaling()
    torch.manual_seed(0)
    plain = torch.nn.Sequential(*(torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:]))).to("cuda", torch.bfloat16)
    x = torch.randn(BATCH, SIZES[0], generator=torch.Generator().manual_seed(0)).to("cuda", torch.bfloat16) * (1 + rank)
    eager = torch.nn.Sequential(*(te.Linear(m.in_features, m.out_features, params_dtype=torch.bfloat16, device="cuda")
                                  for m in plain))
    eager.load_state_dict(plain.state_dict(), strict=False)  # the same weights (TE's own _extra_state aside)
    with autocast(te, recipe, group):
        y = eager(x)
    y.float().sum().backward()
    eager_amax = eager[0].fp8_meta["scaling_fwd"].amax_history[:, 0].max().item()
    FP8GlobalStateManager.reset()  # TE's global amax buffers: the thunder side starts as the eager side did
    executor, marker = find_executor()
    options = {"executors": [executor, *thunder.get_default_executors()]}
    if EXECUTOR == "functional":
        options["transforms"], fp8 = [marker()], autocast(te, recipe, group)
    else:  # the legacy executor takes the recipe here and wraps its forward in fp8_autocast itself
        options["te_fp8_recipe"], fp8 = recipe, contextlib.nullcontext()
    try:
        jitted = thunder.jit(plain, **options)
        with fp8:
            y = jitted(x)
        y.float().sum().backward()
        outcome = (eager_amax, input_amax(thunder.last_traces(jitted)[-1]), None)
    except Exception as error:  # noqa: BLE001
        outcome = (eager_amax, None, f"{type(error).__name__}: {str(error)[:300]}")
    outcomes = [None] * WORLD
    dist.all_gather_object(outcomes, outcome)
    if rank == 0:
        results.put(outcomes) if results is not None else print_verdict(outcomes)
    dist.destroy_process_group()


def print_verdict(outcomes: list) -> None:
    """Exit 0 where thunder's amax is the world's on every rank while eager TE's stays in each rank's group."""
    import thunder
    import transformer_engine

    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    close = lambda a, b: abs(a - b) <= 1e-3 * abs(b)  # noqa: E731
    eager, jitted, errors = ([o[i] for o in outcomes] for i in range(3))
    print(f"first linear's input amax by rank: eager TE (an fp8 group per rank) {eager}, thunder ({EXECUTOR}) {jitted}")
    if any(errors):
        print(f"NOT REPRODUCED: thunder raised (another defect): {next(e for e in errors if e)}")
        sys.exit(1)
    if None in jitted:
        print("NOT REPRODUCED: TE holds no linear in thunder's forward trace: thunder ran them in torch (another defect)")
        sys.exit(1)
    if all(close(t, max(eager)) for t in jitted) and not close(min(eager), max(eager)):
        print(f"REPRODUCED: thunder's {EXECUTOR} TE executor reduced the amax over the world ({jitted[0]} on every "
              f"rank) where eager TE kept it within each rank's fp8 group ({eager})")
        sys.exit(0)
    same = all(close(t, e) for t, e in zip(jitted, eager))
    print("NOT REPRODUCED: " + ("thunder's amaxes stay within each fp8 group, as eager TE's" if same else "another defect"))
    sys.exit(1)


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
