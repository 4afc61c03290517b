"""Patches of what thunder makes of a program at compile time: its CUDA graph transform, and which modules
``thunder.jit`` traces."""

from __future__ import annotations

from typing import Any


def cuda_graph_transform_inert() -> None:
    """``CUDAGraphTransform`` hands every trace back unchanged: a program compiled with it runs without CUDA graphs
    (and no longer meets the backward layout assertion of the known defect)."""
    from thunder.transforms.cudagraph import CUDAGraphTransform

    CUDAGraphTransform.transform_trace_post_optimization = lambda self, trace, **kwargs: trace


def jit_leaves_te_modules_eager() -> None:
    """``thunder.jit`` of a module holding TE's own modules returns the module itself: a silent fallback to eager TE,
    where thunder cannot trace them (the known defect's raise) and should say so."""
    import thunder
    from transformer_engine.pytorch.module.base import TransformerEngineBaseModule

    real = thunder.jit

    def jit(fn: Any, /, *args: Any, **options: Any) -> Any:
        modules = fn.modules() if hasattr(fn, "modules") else ()
        if any(isinstance(module, TransformerEngineBaseModule) for module in modules):
            return fn
        return real(fn, *args, **options)

    thunder.jit = jit
