"""Patches of thunderfx, thunder's Dynamo backend (``thunder.dynamo.ThunderCompiler``): how often the programs it hands
to thunder are compiled."""

from __future__ import annotations

from typing import Any


def recompiles_every_call() -> None:
    """Each thunder program of a Dynamo graph (``thunder.jit`` of a ``torch.fx.GraphModule``) forgets its cache after
    every call, so that every call compiles it again, as a Dynamo recompile at each step would (a guard on a
    distributed wrapper's hook that never holds): every FP8 state starts over each step. ``thunder.jit`` of a module
    of the user's own (the jit compile path) is untouched."""
    import thunder
    import torch

    real = thunder.jit

    def jit(fn: Any, /, *args: Any, **options: Any) -> Any:
        compiled = real(fn, *args, **options)
        if isinstance(fn, torch.fx.GraphModule):  # a ThunderModule, which the split graph holds as its submodule
            compiled.register_forward_pre_hook(lambda module, inputs: thunder.compile_stats(module).interpreter_cache.clear())
        return compiled

    thunder.jit = jit  # ThunderCompiler imports it at each call (``from thunder import jit``, 0.2.2 .. 0.2.7 dev builds)


def jits_the_whole_module() -> None:
    """``thunderfx(module)`` hands the whole module to ``thunder.jit``, no Dynamo split: TE's modules, which Dynamo
    leaves to run eagerly (TE disables Dynamo on their forwards), are then traced by thunder."""
    import thunder
    import thunder.dynamo

    thunder.dynamo.thunderfx = lambda fn, /, **options: thunder.jit(fn)
