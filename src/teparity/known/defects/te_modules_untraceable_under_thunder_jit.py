"""Known upstream defect ``te-modules-untraceable-under-thunder-jit``: ``thunder.jit`` cannot compile a network of TE's
own modules (``te.Linear``, ``te.LayerNormMLP``); with TE 2.9 the failed trace also leaves proxies in TE's global amax
buffer, so every later FP8 step of the process raises, eager TE's too."""

from __future__ import annotations

from teparity.known import signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="te-modules-untraceable-under-thunder-jit",
    summary="thunder.jit cannot compile a network of TE's own modules (te.Linear, te.LayerNormMLP): its first call "
    "raises, and with TE 2.9 the failed trace leaves TensorProxies in TE's global amax buffer, so that eager TE raises "
    "too in that process until TE's global state is reset (thunderfx runs the modules, bitwise as eager TE)",
    executors=(None,),
    signature=signatures.TE_MODULES_UNTRACEABLE,
    checks=("te-modules[jit-linear]", "te-modules[jit-layernorm-mlp]"),
    thunder=">=0.2.2",
    te=">=2.9",
    cause="thunder's interpreter traces into TE's module code (module/base.py prepare_forward, the autograd functions): "
    "with TE 2.9 the trace completes but prepare_forward's FP8GlobalStateManager.add_fp8_tensors_to_global_buffer "
    "registers the trace's amax proxies, and the autocast exit's reduce_and_update_fp8_tensors torch.cat()s them "
    "(TypeError); with TE 2.20 the trace fails first, in thunder's attribute sync on a module's fp8 flag (0.2.2), on a "
    "bound method's __self__ or in tex.layernorm_fwd given proxies (0.2.6 on); with TE 2.12.0 a te.Linear network raises "
    "KeyError: thunder.dtypes.bfloat16 (where, the run at 7cd3218 did not record: the failure names it since de87bc8)",
    seen=(
        "docs/results/h100-te2-7cd3218-new-rows",
        "docs/results/h100-te2.9.0-4bf1ef8-new-rows-bench",
        "docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows",
    ),
)
