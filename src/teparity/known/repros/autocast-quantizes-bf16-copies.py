"""Under torch.autocast(bfloat16) thunder casts a linear's fp32 input and weight to bfloat16 (its autocast rule for
linear, thunder/transforms/autocast.py) before the TE executor quantizes them to FP8, where eager te.Linear quantizes
the fp32 tensors: values near E4M3 rounding midpoints round twice and land on the other side, and outputs and
gradients part from eager TE's beyond TE's FP8 tolerance (rtol 0.125, atol 0.0625) from the first step. An fp32 MLP of
2 linears (no bias), one forward and backward under torch.autocast and TE's FP8 autocast (DelayedScaling): eager
te.Linear on the fp32 tensors; eager te.Linear on bfloat16 copies of the input and weights; thunder.jit with each TE
executor this thunder has first (legacy: it enters fp8_autocast itself, with the recipe given to thunder.jit;
functional: with its transform). Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import contextlib
import importlib.metadata
import sys

import torch

#: Where each executor lives (module, attribute, what its module defines), newest thunder first.
CANDIDATES = {
    "legacy": [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
               ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear")],
    "functional": [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
                   ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")],
}
SIZES, TOKENS = (32, 64, 16), 16
TENSORS = ("output", "input grad", *(f"{i}.weight grad" for i in range(len(SIZES) - 1)))


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def executor_options(thunder, kind: str, recipe) -> "dict | None":
    """thunder.jit's keyword arguments that put the executor first, or None where this thunder has none."""
    for module_name, attribute, marker in CANDIDATES[kind]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, marker) and getattr(module, attribute, None) is not None:
            options = {"executors": [getattr(module, attribute), *thunder.get_default_executors()]}
            if kind == "functional":
                return {**options, "transforms": [getattr(module, marker)()]}
            return {**options, "te_fp8_recipe": recipe}
    return None


def mlp(linear) -> torch.nn.Sequential:
    """The linears `linear(fan_in, fan_out)` of SIZES, with seeded fp32 weights (rounded to the linears' dtype)."""
    generator, layers = torch.Generator().manual_seed(0), [linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)
    return torch.nn.Sequential(*layers).cuda()


def step(net, params: list, fp8, bf16_input: bool = False) -> list[torch.Tensor]:
    """One forward under torch.autocast(bfloat16) and `fp8`, one backward: the output and the gradients (input's, then
    the parameters')."""
    draw = lambda shape, seed: torch.randn(shape, generator=torch.Generator().manual_seed(seed)).cuda()  # noqa: E731
    x = draw((TOKENS, SIZES[0]), hash((0, 0, 0)) & 0x7FFFFFFF).requires_grad_()  # seeded as in the run that found it
    grad_output = draw((TOKENS, SIZES[-1]), hash((500, 0, 0)) & 0x7FFFFFFF)
    with torch.autocast("cuda", dtype=torch.bfloat16), fp8():
        y = net(x.to(torch.bfloat16) if bf16_input else x)
    y.backward(grad_output.to(y.dtype))
    return [t.detach().float() for t in (y, x.grad, *(p.grad for p in params))]


def outside(got: torch.Tensor, want: torch.Tensor) -> int:
    """Elements of `got` outside TE's FP8 tolerance around `want` (rtol 0.125, atol 0.0625)."""
    return int(((got - want).abs() > 0.0625 + 0.125 * want.abs()).sum())


def compared(kind: str, names: list, got: list, eager: list, copies: list) -> "tuple[str, str | None]":
    """What one executor's run says, from its trace's symbol `names` and its tensors `got` beside eager TE's on the fp32
    tensors and on bfloat16 copies: the outcome, and the tensors outside TE's tolerance where it reproduces (else None)."""
    linears = len(SIZES) - 1
    held = sum(n.startswith("te_linear_") for n in names) if kind == "legacy" else names.count("te_functional_linear_fwd")
    off_copies = max((g - c).abs().max().item() for g, c in zip(got, copies))
    off_eager = {name: (outside(g, e), g.numel(), (g - e).abs().max().item()) for name, g, e in zip(TENSORS, got, eager)}
    parted = ", ".join(f"{name} {n}/{size} (max {d:.3g})" for name, (n, size, d) in off_eager.items() if n)
    if held < linears:
        return f"{kind}: TE held {held} of {linears} linears (another defect: torch ran the others)", None
    if off_copies <= 2**-10 and parted:
        return (f"{kind}: thunder's output and gradients are eager TE's on bfloat16 copies (within "
                f"{off_copies:.3g}); outside TE's tolerance of eager TE's on the fp32 tensors: {parted}"), parted
    if off_copies <= 2**-10:
        return (f"{kind}: thunder quantizes bfloat16 copies (within {off_copies:.3g}) but stays within TE's "
                "tolerance of eager TE"), None
    worst = max(d for _, _, d in off_eager.values())
    return (f"{kind}: thunder is {off_copies:.3g} from eager TE on bfloat16 copies and {worst:.3g} from "
            f"eager TE on the fp32 tensors{f' ({parted} outside its tolerance)' if parted else ''}"), None


def main() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    try:
        import thunder
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    version = thunder.__version__ if isinstance(thunder.__version__, str) else importlib.metadata.version("lightning-thunder")
    print(f"thunder {version}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    (torch.zeros(1, device="cuda", requires_grad=True) * 1).sum().backward()  # TE < 2.7: give autograd's GPU thread a context
    recipe = DelayedScaling()
    te_fp8 = lambda: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    eager_model = mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32))
    eager = step(eager_model, list(eager_model.parameters()), te_fp8)
    copies_model = mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.bfloat16))
    copies = step(copies_model, list(copies_model.parameters()), te_fp8, bf16_input=True)
    reproduced, outcomes = [], []
    for kind in CANDIDATES:
        options = executor_options(thunder, kind, recipe)
        if options is None:
            print(f"{kind}: this thunder has no {kind} TE executor")
            continue
        plain = mlp(lambda a, b: torch.nn.Linear(a, b, bias=False))
        jitted = thunder.jit(plain, **options)
        fp8 = te_fp8 if kind == "functional" else contextlib.nullcontext  # legacy: thunder enters fp8_autocast
        try:
            got = step(jitted, [jitted.get_parameter(name) for name, _ in plain.named_parameters()], fp8)
        except Exception as error:  # noqa: BLE001
            outcomes.append(f"{kind}: thunder raised {error!r:.200} (another defect)")
            print(outcomes[-1])
            continue
        names = [bsym.sym.name for bsym in thunder.last_traces(jitted)[-1].bound_symbols]
        outcome, parted = compared(kind, names, got, eager, copies)
        if parted:
            reproduced.append(f"{kind} executor: {parted}")
        outcomes.append(outcome)
        print(outcomes[-1])
    if not outcomes:
        cannot("this thunder has neither TE executor")
    if reproduced:
        print("REPRODUCED: under torch.autocast thunder's output and gradients are eager TE's on bfloat16 copies of the "
              f"fp32 input and weights, outside TE's FP8 tolerance of eager TE's on the fp32 tensors: {'; '.join(reproduced)}")
        sys.exit(0)
    print(f"NOT REPRODUCED: {'; '.join(outcomes)}")
    sys.exit(1)


if __name__ == "__main__":
    main()
