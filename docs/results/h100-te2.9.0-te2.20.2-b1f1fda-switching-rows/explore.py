"""Exploration for the gate's next rows, one case per process (python3 explore.py CASE > CASE.json).

Cases: te-modules-{jit,thunderfx}-{linear,lnmlp}: a model of TE modules under thunder against the same modules run
eagerly, 3 SGD steps under te.autocast(DelayedScaling()): outputs, gradients, FP8 state each step; after a thunder
failure, eager TE in the same process. inference8bit-{float32,bfloat16}: TEInference8BitTransform against eager
models of it (weights quantized by TE's Float8Quantizer at 448/amax and dequantized).
"""
from __future__ import annotations

import copy
import json
import sys
import traceback


def _diff(a, b):
    import torch
    if a is None or b is None:
        return None if a is b else "one side None"
    a, b = a.detach().float(), b.detach().float()
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    return float((a - b).abs().max()) if a.numel() else 0.0


def _state(m):
    out = {}
    for name, child in m.named_modules():
        meta = getattr(child, "fp8_meta", None) or {}
        for key in ("scaling_fwd", "scaling_bwd"):
            s = meta.get(key)
            if s is not None and hasattr(s, "amax_history"):
                out[f"{name}.{key}"] = (s.amax_history.detach().float().cpu().clone(), s.scale.detach().float().cpu().clone())
    return out


def _err(e):
    return {"type": type(e).__name__, "message": str(e)[:600], "where": traceback.format_exc().splitlines()[-4:-1]}


def te_modules(compile_path: str, model: str) -> dict:
    import torch
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling
    import thunder

    torch.manual_seed(0)
    dt = torch.bfloat16
    if model == "linear":
        m = torch.nn.Sequential(te.Linear(64, 128, params_dtype=dt), te.Linear(128, 32, params_dtype=dt)).cuda()
    else:
        m = torch.nn.Sequential(te.LayerNormMLP(64, 128, params_dtype=dt)).cuda()
    e = copy.deepcopy(m)
    if compile_path == "jit":
        c = thunder.jit(m)
    else:
        from thunder.dynamo import thunderfx
        c = thunderfx(m)
    recipe = DelayedScaling()
    opt_c = torch.optim.SGD(m.parameters(), lr=0.1)
    opt_e = torch.optim.SGD(e.parameters(), lr=0.1)
    steps = []
    for step in range(3):
        g = torch.Generator(device="cuda").manual_seed(100 + step)
        x = torch.randn(16, 64, device="cuda", dtype=dt, generator=g)
        rec = {"step": step}
        outs = {}
        for side, mod, opt in (("eager", e, opt_e), ("thunder", c, opt_c)):
            try:
                with te.autocast(recipe=recipe):
                    y = mod(x)
                y.float().square().mean().backward()
                outs[side] = y.detach().clone()
                opt.step()
            except Exception as err:  # noqa: BLE001
                rec[f"{side}_error"] = _err(err)
        if "thunder" in outs:
            rec["output_maxdiff"] = _diff(outs["thunder"], outs["eager"])
            rec["param_maxdiff"] = {n: _diff(p, q) for (n, p), (_, q) in zip(m.named_parameters(), e.named_parameters())}
            se, sc = _state(e), _state(m)
            rec["state_keys"] = {"eager": sorted(se), "thunder_module": sorted(sc)}
            rec["state_maxdiff"] = {k: [_diff(sc[k][0], se[k][0]), _diff(sc[k][1], se[k][1])] for k in se if k in sc}
        for p in list(m.parameters()) + list(e.parameters()):
            p.grad = None
        steps.append(rec)
        if "thunder_error" in rec:
            break
    after = {}
    try:  # eager TE after the thunder side, in the same process
        f = te.Linear(64, 32, params_dtype=dt).cuda()
        with te.autocast(recipe=DelayedScaling()):
            y = f(torch.randn(16, 64, device="cuda", dtype=dt))
        y.sum().backward()
        after["eager_te_after"] = "ran"
    except Exception as err:  # noqa: BLE001
        after["eager_te_after"] = _err(err)
    return {"steps": steps, **after}


def inference8bit(dtype_name: str) -> dict:
    import torch
    import torch.nn.functional as F
    import transformer_engine.pytorch as te
    import transformer_engine_torch as tex
    import thunder
    from thunder.transforms.te_inference import TEInference8BitTransform

    dt = getattr(torch, dtype_name)
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32)).to(dt).requires_grad_(False)
    ref = copy.deepcopy(m)
    t = TEInference8BitTransform()
    jm = thunder.jit(m, transforms=[t], executors=(t.get_executor(), *thunder.get_default_executors()))
    x = torch.randn(16, 64, device="cuda", dtype=dt)
    out = {}
    try:
        y = jm(x)
    except Exception as err:  # noqa: BLE001
        return {"thunder_error": _err(err)}

    def deq(w):
        minmax = w.aminmax()
        amax = torch.maximum(minmax.min.abs(), minmax.max.abs()).to(torch.float32)
        scale = torch.finfo(torch.float8_e4m3fn).max / amax
        q = te.Float8Quantizer(scale=scale, amax=amax, fp8_dtype=tex.DType.kFloat8E4M3, rowwise=True, columnwise=False)
        return q.quantize(w), scale

    def layers(mode):
        h = x
        for mod in ref:
            if isinstance(mod, torch.nn.Linear):
                qw, scale = deq(mod.weight)
                wd = qw.dequantize(dtype=dt)
                if mode == "torch":
                    h = F.linear(h, mod.weight, mod.bias)
                elif mode == "deq-bias-fused":
                    h = F.linear(h, wd, mod.bias)
                elif mode == "deq-bias-after":
                    h = F.linear(h, wd) + mod.bias
                elif mode == "te-basiclinear-bias-after":
                    w = qw
                    o, *_ = te.ops.BasicLinear._functional_forward(h, w, with_quantized_compute=False,
                                                                    weight_requires_grad=False, input_requires_grad=False)
                    h = o + mod.bias
                elif mode == "deq-manual-bias-after":
                    wm = (qw._data.view(torch.float8_e4m3fn).to(torch.float32) / scale).to(dt)
                    h = F.linear(h, wm) + mod.bias
            else:
                h = mod(h)
        return h

    for mode in ("torch", "deq-bias-fused", "deq-bias-after", "te-basiclinear-bias-after", "deq-manual-bias-after"):
        try:
            r = layers(mode)
            out[mode] = {"maxdiff": _diff(y, r), "bitwise": bool(torch.equal(y, r))}
        except Exception as err:  # noqa: BLE001
            out[mode] = _err(err)
    trace = thunder.last_traces(jm)[-1]
    out["symbols"] = sorted({b.sym.name for b in trace.bound_symbols})
    return out


if __name__ == "__main__":
    case = sys.argv[1]
    head = {"case": case}
    try:
        import thunder
        import transformer_engine
        head.update(thunder=thunder.__version__, te=transformer_engine.__version__)
        if case.startswith("te-modules-"):
            _, _, path, model = case.split("-")
            body = te_modules(path, model)
        else:
            body = inference8bit(case.split("-")[1])
    except Exception as err:  # noqa: BLE001
        body = {"error": _err(err)}
    print(json.dumps({**head, **body}, indent=1, default=str))
