"""thunder's functional TE executor keeps a linear's FP8 state (amax history, scales) only while the recipe object is
the very same one: with `te.autocast(recipe=DelayedScaling())` written inline, a new but equal recipe each step, every
step starts from a fresh state (scale 1, empty history), where eager TE keeps each module's state across equal
DelayedScaling recipes. An fp32 MLP of 2 linears (no bias), 3 SGD steps: eager te.Linear with a new recipe object each
step; thunder.jit with the functional executor first (and its transform), once with one recipe object for every step
and once with a new one each step. Eager TE takes TE's Python scale update (NVTE_UNFUSED_FP8_UPDATE=1), the executor's
own arithmetic. Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import importlib.metadata
import os
import sys

import torch

#: Where the functional executor lives (module, attribute, its transform), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
              ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2")]
SIZES, TOKENS, STEPS, LR = (32, 64, 16), 16, 3, 0.05


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def executor_options(thunder) -> dict:
    """thunder.jit's keyword arguments that put the functional executor first, with its transform."""
    for module_name, attribute, transform in CANDIDATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, transform):
            executor = getattr(module, attribute)
            if executor is None:
                cannot(f"{module_name}.{attribute} is None: this thunder could not import TransformerEngine")
            return {"executors": [executor, *thunder.get_default_executors()], "transforms": [getattr(module, transform)()]}
    cannot("this thunder has no functional TE executor")


def draw(shape: tuple, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).cuda()


def data(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's input (it requires grad) and output gradient, seeded as in the run that found the defect."""
    x = draw((TOKENS, SIZES[0]), hash((0, step, 0)) & 0x7FFFFFFF)
    return x.requires_grad_(), draw((TOKENS, SIZES[-1]), hash((500, step, 0)) & 0x7FFFFFFF)


def mlp(linear) -> torch.nn.Sequential:
    """The linears `linear(fan_in, fan_out)` of SIZES, with seeded weights."""
    generator, layers = torch.Generator().manual_seed(0), [linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)
    return torch.nn.Sequential(*layers).cuda()


def train(net, params: list, fp8, recipe_at) -> list[list[torch.Tensor]]:
    """STEPS SGD steps under TE's FP8 autocast with `recipe_at(step)`: each step's output and gradients."""
    optimizer, steps = torch.optim.SGD(params, lr=LR), []
    for step in range(STEPS):
        x, grad_output = data(step)
        with fp8(recipe_at(step)):
            y = net(x)
        y.backward(grad_output)
        steps.append([t.detach().float().clone() for t in (y, x.grad, *(p.grad for p in params))])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return steps


def parted(got: list, want: list) -> list[float]:
    """Per step, the largest |got - want| over the output and the gradients (inf where either is NaN)."""
    return [max((a - b).abs().nan_to_num(nan=float("inf")).max().item() for a, b in zip(g, w)) for g, w in zip(got, want)]


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
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    os.environ["NVTE_UNFUSED_FP8_UPDATE"] = "1"  # eager TE's scale update in Python, as the executor's
    executor_options(thunder)  # this thunder has one
    fp8 = lambda recipe: te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)  # noqa: E731
    eager_model = mlp(lambda a, b: te.Linear(a, b, bias=False, params_dtype=torch.float32))
    eager = train(eager_model, list(eager_model.parameters()), fp8, lambda step: DelayedScaling())
    one, runs, held = DelayedScaling(), {}, []
    for name, recipe_at in (("one", lambda step: one), ("new", lambda step: DelayedScaling())):
        plain = mlp(lambda a, b: torch.nn.Linear(a, b, bias=False))
        jitted = thunder.jit(plain, **executor_options(thunder))  # a transform of its own
        try:
            runs[name] = train(jitted, [jitted.get_parameter(n) for n, _ in plain.named_parameters()], fp8, recipe_at)
        except Exception as error:  # noqa: BLE001
            print(f"NOT REPRODUCED: thunder raised (another defect): {error!r:.300}")
            sys.exit(1)
        names = [bsym.sym.name for bsym in thunder.last_traces(jitted)[-1].bound_symbols]
        held.append(names.count("te_functional_linear_fwd"))
    linears = len(SIZES) - 1
    if min(held) < linears:
        print(f"NOT REPRODUCED: another defect: the functional executor held {min(held)} of {linears} linears "
              "(te_functional_linear_fwd in the forward trace): thunder ran the others in torch")
        sys.exit(1)
    same, new = parted(runs["one"], eager), parted(runs["new"], eager)
    for step in range(STEPS):
        print(f"step {step}: max |thunder - eager TE| (outputs, gradients): one recipe object for every step "
              f"{same[step]:.3g}; a new DelayedScaling() each step {new[step]:.3g}")
    if new[1] > 0.25 and new[1] > 2 * same[1]:
        print(f"REPRODUCED: with a new (equal) DelayedScaling object each step thunder parts from eager TE at step 1 "
              f"by {new[1]:.3g} (step 0: {new[0]:.3g}), where with one recipe object it stays within {same[1]:.3g}: "
              "its FP8 state starts afresh with every recipe object, eager TE's carries on")
        sys.exit(0)
    if max(new) <= 2 * max(same):
        print(f"NOT REPRODUCED: a new recipe object each step changes nothing: thunder stays within {max(new):.3g} "
              f"of eager TE (one recipe object: {max(same):.3g})")
    else:
        print(f"NOT REPRODUCED: another defect: thunder parts from eager TE by {max(new):.3g} (one recipe object: "
              f"{max(same):.3g}), but not from step 1 on")
    sys.exit(1)


if __name__ == "__main__":
    main()
