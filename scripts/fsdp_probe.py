"""thunder's FSDP on 2 gloo CPU ranks, no TE: (a) `bucketing`: one fwd+bwd with an input that requires grad under
each sharding x bucketing strategy; (b) `nosync`: 2 micro-batches, the first under no-sync (input grad on the last
only, as teparity's fsdp-grad-accumulation), then: was _thunder_fsdp_unsharded_grad stashed on the original module's
parameters, and do the accumulated gradients equal the analytic ones (mean over ranks of the sum over micro-batches)?
One JSON line per variant. usage: PYTHONPATH=<thunder build> python fsdp_probe.py bucketing|nosync [thunder|skip]"""
import json, os, sys, tempfile, traceback
import torch, torch.distributed as dist, torch.multiprocessing as mp

SIZES, BATCH, W = (32, 64, 16), int(os.environ.get("PROBE_BATCH", 8)), 2
from importlib.metadata import version
THUNDER = version("lightning-thunder")

def model_():
    g = torch.Generator().manual_seed(0)
    m = torch.nn.Sequential(*[torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])])
    with torch.no_grad():
        for p in m.parameters(): p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return m

def data(rank, micro):
    g = torch.Generator().manual_seed(100 * rank + micro)
    return torch.randn(BATCH, SIZES[0], generator=g), torch.randn(BATCH, SIZES[-1], generator=g)

def reference(micros, first=0):  # mean over ranks of the summed micro-batch gradients, as FSDP/DDP accumulation gives
    m = model_()
    for r in range(W):
        for k in range(first, micros):
            x, go = data(r, k); m(x).backward(go)
    return {n: p.grad / W for n, p in m.named_parameters()}

def fake_te():
    """A stand-in for TE's legacy executor (no TE): prims.linear claimed, its backward one symbol that returns
    (grad_input, grad_weight, grad_bias), the shape of transformer_engineex._linear_grad/te_functional_linear_backward."""
    import thunder, thunder.core.prims as prims
    from thunder.extend import OperatorExecutor, register_executor
    from thunder.core.proxies import TensorProxy
    ex = OperatorExecutor("fake_te", version="0"); register_executor(ex)
    fwd = ex.register_operator("fake_te_linear", meta=lambda a, w, b: TensorProxy(like=a, shape=(*a.shape[:-1], w.shape[0])),
                               fn=torch.nn.functional.linear)
    bwd = ex.register_operator("fake_te_linear_bwd", meta=lambda g, a, w: (TensorProxy(like=a), TensorProxy(like=w),
                               TensorProxy(like=g, shape=(w.shape[0],))), fn=lambda g, a, w: (g @ w, g.t() @ a, g.sum(0)))
    v2 = os.environ.get("PROBE_FAKE_TE") in ("v2", "v2tokens")  # the functional executor's shape: (ga, gw) from one symbol, bias apart
    # 0.2.3's functional executor also passes (ga, gw) through one FP8 state update that returns them as its outputs
    upd = ex.register_operator("fake_te_update", meta=lambda ga, gw: (TensorProxy(like=ga), TensorProxy(like=gw)),
                               fn=lambda ga, gw: (ga, gw))
    def grad(a, w, b):
        out = fwd(a, w, b); g = prims.get_grad(out); ga, gw, gb = bwd(g, a, w)
        if v2: ga, gw, gb = ga, gw, g.sum(tuple(range(g.ndim - 1)))
        if os.environ.get("PROBE_FAKE_TE") == "v2tokens": ga, gw = upd(ga, gw)
        prims.put_grad(a, ga); prims.put_grad(w, gw)
        if b is not None: prims.put_grad(b, gb)
        return out
    ex.register_implementation(prims.linear, checker=lambda a, w, b: True, execution_transform=fwd, grad_transform=grad)
    return {"executors": [ex, *thunder.get_default_executors()]}

def jit_fsdp(sharding, bucketing):
    import thunder, thunder.distributed as td
    from packaging.version import Version
    opts = dict(sharding_strategy=td.FSDPType[sharding], bucketing_strategy=td.FSDPBucketingStrategy[bucketing],
                broadcast_from=None, device=torch.device("cpu"))
    if Version(THUNDER) < Version("0.2.0.dev20240811"):
        return thunder.jit(td.fsdp(model_(), **opts), **(FAKE_TE if os.environ.get("PROBE_FAKE_TE") else {}))
    extra = {"delay_trace_split": False} if os.environ.get("PROBE_NO_DELAY_SPLIT") else {}
    if os.environ.get("PROBE_FAKE_TE"): extra.update(FAKE_TE)
    return td.fsdp(thunder.jit(model_(), **extra), **opts)

def full(shard, shape):
    out = torch.empty((shard.shape[0] * W, *shard.shape[1:]))
    dist.all_gather_into_tensor(out, shard.detach().contiguous())
    return out[: shape[0]].reshape(shape)

def run(rank, mode, sync, sharding, bucketing):
    import thunder, thunder.distributed as td
    jm = jit_fsdp(sharding, bucketing)
    shapes = {n: p.shape for n, p in model_().named_parameters()}
    res = {}
    micros = 2 if mode == "nosync" else 1
    for k in range(micros):
        x, go = data(rank, k)
        x.requires_grad_(k == micros - 1 and not os.environ.get("PROBE_X_NOGRAD"))
        ctx = (jm.no_sync() if sync == "thunder" else td.skip_data_parallel_grad_sync()) if k < micros - 1 else None
        if ctx is None:
            jm(x).backward(go)
            continue
        with ctx:
            jm(x).backward(go)
            res["stashed"] = sorted(n for n, _ in jm.named_parameters()
                                    if hasattr(jm._model.get_parameter(n), "_thunder_fsdp_unsharded_grad"))
            res["shard_grads_after_nosync"] = sorted(n for n, _ in jm.named_parameters() if jm.get_parameter(n).grad is not None)
        if sync == "skip":  # thunder's _sync_grads one collective at a time, SUM of pre-divided (gloo has no AVG)
            for n, _ in jm.named_parameters():
                o = jm._model.get_parameter(n)
                if hasattr(o, "_thunder_fsdp_unsharded_grad"):
                    u = o._thunder_fsdp_unsharded_grad / W; c = u.size(0) // W
                    s = u.narrow(0, rank * c, c).clone(); dist.reduce_scatter_tensor(s, u)
                    p = jm.get_parameter(n); p.grad = s if p.grad is None else p.grad + s
                    del o._thunder_fsdp_unsharded_grad
    ref = reference(micros)
    got = {n: full(jm.get_parameter(n).grad, shapes[n]) if jm.get_parameter(n).grad is not None else None for n in sorted(shapes)}
    res["missing_grads"] = [n for n, g in got.items() if g is None]
    res["max_abs_diff"] = {n: round((g - ref[n]).abs().max().item(), 7) for n, g in got.items() if g is not None}
    if micros > 1:  # the last micro-batch's alone: what is left if the no-sync ones were lost
        last = reference(micros, first=micros - 1)
        res["max_abs_diff_to_last_micro_only"] = max(round((g - last[n]).abs().max().item(), 7) for n, g in got.items() if g is not None)
    res["ratio_to_ref"] = {n: round((g.norm() / ref[n].norm()).item(), 4) for n, g in got.items() if g is not None}
    return res

def rank_main(rank, init, mode, sync, variants, q):
    global FAKE_TE
    FAKE_TE = fake_te() if os.environ.get("PROBE_FAKE_TE") else {}
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=W)
    for sharding, bucketing in variants:
        try:
            out = {"outcome": "ran", **run(rank, mode, sync, sharding, bucketing)}
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)
            out = {"outcome": "raised", "error": f"{type(e).__name__}: {str(e)[:220]}",
                   "where": [f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in tb[-3:]]}
        q.put((rank, sharding, bucketing, out))
    dist.destroy_process_group()

if __name__ == "__main__":
    import thunder
    mode = sys.argv[1]; sync = sys.argv[2] if len(sys.argv) > 2 else "skip"
    buckets = ("NONE", "LAYER", "BLOCK") if mode == "bucketing" else ("NONE",)
    variants = [(s, b) for s in ("ZERO2", "ZERO3") for b in buckets]
    q = mp.get_context("spawn").SimpleQueue()
    init = "file://" + tempfile.mktemp(prefix="fsdp-probe-")
    mp.spawn(rank_main, args=(init, mode, sync, variants, q), nprocs=W)
    got = {}
    while not q.empty():
        r, s, b, out = q.get(); got.setdefault((s, b), {})[r] = out
    for (s, b), by_rank in got.items():
        same = by_rank.get(0) == by_rank.get(1)
        print(json.dumps({"thunder": THUNDER, **({"executor": "fake_te" + {"v2": "_v2", "v2tokens": "_v2_tokens"}.get(os.environ.get("PROBE_FAKE_TE"), "")} if os.environ.get("PROBE_FAKE_TE") else {}),
                          **({"input_requires_grad": False} if os.environ.get("PROBE_X_NOGRAD") else {}), "torch": torch.__version__, "mode": mode,
                          **({"sync": sync} if mode == "nosync" else {}), "sharding": s, "bucketing": b,
                          **({"ranks_agree": True, **by_rank[0]} if same else {"by_rank": by_rank})}), flush=True)
