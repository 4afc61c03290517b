"""Inside a rank: a network built of TE's own modules (``te.Linear`` layers, or one ``te.LayerNormMLP``), what TE's
users compile first, trained a few steps under ``te.autocast(DelayedScaling())`` as compiled by thunder
(``side="thunder"``: ``thunder.jit`` or ``thunderfx``) or run eagerly (``side="eager"``), from the same seeded
parameters and inputs. Each side returns per step its output, its parameters after the optimizer step and every TE
module's FP8 state (``fp8_meta`` amax histories and scales, whole), as ``records.TeModulesRun``.

Where thunder raised, the side then runs one eager ``te.Linear`` step in the same process and records what that
raised: a failed trace can leave proxies in TE's global amax buffer, which then breaks every later FP8 step of the
process (the rank's reset between runs clears it before the next run)."""

from __future__ import annotations

import dataclasses
from typing import Any

from teparity.inrank.fp8state import whole_states
from teparity.records import RankError, TeModulesRun
from teparity.strategies import STRATEGIES, Strategy

#: The networks of TE modules, by name: (input features, hidden, output features).
TE_MODULE_NETWORKS = ("linear", "layernorm-mlp")
COMPILE_PATHS = ("jit", "thunderfx")


@dataclasses.dataclass(frozen=True)
class TeModulesSpec:
    side: str = "thunder"
    compile_path: str = "jit"
    network: str = "linear"
    steps: int = 3
    batch: int = 16
    sizes: tuple[int, int, int] = (64, 128, 32)
    lr: float = 0.05
    strategy: str = "one-rank"

    @property
    def parallel(self) -> Strategy:
        return STRATEGIES[self.strategy]


def te_modules_run(rank: int, world_size: int, spec: TeModulesSpec) -> TeModulesRun:
    """``spec.steps`` SGD steps of the spec's network on this rank's GPU. A side returns what it raised instead of
    raising (a one-rank run: no collective waits on it); thunder's, with what eager TE's step after it raised."""
    module = _network(spec)
    try:
        forward = _compiled(module, spec.compile_path) if spec.side == "thunder" else module
        outputs, parameters, states = _train(forward, module, spec, rank)
        if spec.side == "thunder" and spec.compile_path == "jit":
            _assert_thunder_compiled(forward)
    except Exception as error:
        return TeModulesRun(error=RankError.of(error), eager_after=_eager_step_after() if spec.side == "thunder" else None)
    return TeModulesRun(outputs, parameters, states)


def _network(spec: TeModulesSpec) -> Any:
    """The spec's network in bfloat16 on this rank's GPU, every parameter drawn from one seeded generator."""
    import torch
    import transformer_engine.pytorch as te

    inputs, hidden, outputs = spec.sizes
    dtype = torch.bfloat16
    if spec.network == "linear":
        network = torch.nn.Sequential(te.Linear(inputs, hidden, params_dtype=dtype), te.Linear(hidden, outputs, params_dtype=dtype))
    else:
        network = torch.nn.Sequential(te.LayerNormMLP(inputs, hidden, params_dtype=dtype))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in network.named_parameters():
            drawn = torch.randn(parameter.shape, generator=generator)
            value = drawn / parameter.shape[1] ** 0.5 if parameter.ndim == 2 else (
                1 + 0.1 * drawn if name.endswith("layer_norm_weight") else 0.1 * drawn)
            parameter.copy_(value)
    return network.cuda()


def _compiled(module: Any, compile_path: str) -> Any:
    if compile_path == "thunderfx":
        from thunder.dynamo import thunderfx

        return thunderfx(module)
    import thunder

    return thunder.jit(module)


def _assert_thunder_compiled(forward: Any) -> None:
    """The steps ran thunder's program of the modules, not the modules handed back (a silent fallback to eager TE)."""
    import thunder

    misses = getattr(thunder.compile_stats(forward), "cache_misses", 0)
    if not misses:
        raise AssertionError(f"thunder.jit compiled nothing ({type(forward).__name__} ran, {misses} compiles): the TE "
                             "modules ran eagerly, outside thunder")


def _train(forward: Any, module: Any, spec: TeModulesSpec, rank: int) -> tuple[tuple[Any, ...], tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    import torch
    from transformer_engine.common.recipe import DelayedScaling

    from teparity.inrank.networks import seeded_input
    from teparity.stack.te_api import te_autocast

    recipe, optimizer = DelayedScaling(), torch.optim.SGD(module.parameters(), lr=spec.lr)
    outputs, parameters, states = [], [], []
    for step in range(spec.steps):
        x = seeded_input((spec.batch, spec.sizes[0]), test_seed=23, step=step, rank=rank, device="cuda", dtype=torch.bfloat16)
        with te_autocast(recipe):
            y = forward(x)
        y.backward(seeded_input(tuple(y.shape), test_seed=24, step=step, rank=rank, device="cuda", dtype=y.dtype))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        outputs.append(y.detach().float().cpu())
        parameters.append({n: p.detach().float().cpu().clone() for n, p in module.named_parameters()})
        states.append(whole_states(module))
    return tuple(outputs), tuple(parameters), tuple(states)


def _eager_step_after() -> str | None:
    """One eager ``te.Linear`` FP8 step in this process: what it raised (its first line), or None where it ran."""
    import torch
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling

    from teparity.stack.te_api import te_autocast

    try:
        linear = te.Linear(64, 32, params_dtype=torch.bfloat16).cuda()
        with te_autocast(DelayedScaling()):
            y = linear(torch.ones(16, 64, device="cuda", dtype=torch.bfloat16))
        y.sum().backward()
        torch.cuda.synchronize()
    except Exception as error:
        return f"{type(error).__name__}: {error}".splitlines()[0][:400]
    return None
