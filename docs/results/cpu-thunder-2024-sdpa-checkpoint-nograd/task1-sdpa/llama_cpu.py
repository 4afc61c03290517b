"""thunder.jit (default executors) of teparity's llama-like block on CPU, forward + backward, 2 steps, fp32,
input (2, 16, 64), block width 64, MLP 128 (teparity's LLAMA case). The model is copied from
/work/main/src/teparity/inrank/models.py (RMSNorm, LlamaBlock, llama_block) at 4306794.

Usage: PYTHONPATH=<thunder dir> python llama_cpu.py [options]
  --cat-on-cpu     make the torchcompile_cat executor (a default executor from 0.2.0.dev20240901) accept CPU
                   tensors as it accepts CUDA ones on a GPU (its checker cuda_device_checker refuses CPU), so its
                   fusion_pass (Region.__init__ -> order_proxies) runs as on the GPU host
  --sdpa-claims    make the sdpa executor claim SDPA as on a GPU (checker -> True, backend -> MEMORY_EFFICIENT, what
                   an H200 picks for fp32); the traces and fusion passes are then built as on the GPU, and executing
                   the forward fails on CPU (aten::_scaled_dot_product_efficient_attention has no CPU kernel)
  --fork           as teparity's fork server: the parent imports torch, torch._dynamo, torch._inductor.compile_fx and
                   torch._inductor.runtime.triton_heuristics, forks, and the child imports thunder and runs
  --warm N         first jit and run N small MLPs in the same process (a warm rank)
  --recursionlimit N, --stack MiB (run in a thread with that stack size)
"""
import argparse, faulthandler, importlib.metadata, os, platform, signal, sys, threading

faulthandler.enable()
p = argparse.ArgumentParser()
p.add_argument("--cat-on-cpu", action="store_true")
p.add_argument("--sdpa-claims", action="store_true")
p.add_argument("--fork", action="store_true")
p.add_argument("--recursionlimit", type=int)
p.add_argument("--stack", type=int)
p.add_argument("--steps", type=int, default=2)
p.add_argument("--warm", type=int, default=0, help="first jit and run N Linear-GELU-Linear models (fwd+bwd) in the same process, "
               "as a warm teparity rank has run earlier tasks")
args = p.parse_args()

import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(torch.nn.Module):
    HEAD_DIM = 16

    def __init__(self, dim, hidden, max_seq=64):
        super().__init__()
        self.heads = dim // self.HEAD_DIM
        self.attention_norm = RMSNorm(dim)
        self.wq = torch.nn.Linear(dim, dim, bias=False)
        self.wk = torch.nn.Linear(dim, dim, bias=False)
        self.wv = torch.nn.Linear(dim, dim, bias=False)
        self.wo = torch.nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)
        inverse = 1.0 / (10000 ** (torch.arange(0, self.HEAD_DIM, 2).float() / self.HEAD_DIM))
        angles = torch.outer(torch.arange(max_seq).float(), inverse)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def _rotary(self, x):
        seq = x.shape[1]
        cos, sin = self.cos[:seq].to(x.dtype)[None, :, None, :], self.sin[:seq].to(x.dtype)[None, :, None, :]
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    def forward(self, x):
        batch, seq, dim = x.shape
        h = self.attention_norm(x)
        q = self._rotary(self.wq(h).view(batch, seq, self.heads, self.HEAD_DIM)).transpose(1, 2)
        k = self._rotary(self.wk(h).view(batch, seq, self.heads, self.HEAD_DIM)).transpose(1, 2)
        v = self.wv(h).view(batch, seq, self.heads, self.HEAD_DIM).transpose(1, 2)
        attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(attention.transpose(1, 2).reshape(batch, seq, dim))
        h = self.ffn_norm(x)
        return x + self.w2(torch.nn.functional.silu(self.w1(h)) * self.w3(h))


def build(dim=64, hidden=128, seed=4):
    block = LlamaBlock(dim, hidden)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, prm in block.named_parameters():
            if name.endswith("norm.weight"):
                prm.copy_(1 + 0.1 * torch.randn(prm.shape, generator=g))
            else:
                prm.copy_(torch.randn(prm.shape, generator=g) / prm.shape[1] ** 0.5)
    return block


def main():
    import thunder, optree
    print(f"python {platform.python_version()} torch {torch.__version__} thunder {importlib.metadata.version('lightning-thunder')} "
          f"optree {optree.__version__}; thunder from {os.path.dirname(thunder.__file__)}")
    if args.recursionlimit:
        sys.setrecursionlimit(args.recursionlimit)
    print("recursion limit", sys.getrecursionlimit(), "| thread stack size", threading.stack_size() or "default")
    if args.cat_on_cpu:
        import thunder.executors.torch_compile as tc
        for info in tc.torch_compile_cat_ex._implmap.values():
            info.checker = lambda *a, **k: True
        print("torchcompile_cat checker patched to accept CPU tensors:", len(tc.torch_compile_cat_ex._implmap), "ops")
    if args.sdpa_claims:
        import thunder.executors.sdpaex as sdpaex
        for info in sdpaex.sdpa_ex._implmap.values():
            info.checker = lambda *a, **k: True
        sdpaex._fused_sdp_choice = lambda *a, **k: sdpaex.SpdaBackend.MEMORY_EFFICIENT
        print("sdpa executor patched to claim:", [str(op) for op in sdpaex.sdpa_ex._implmap])
    print("default executors:", [e.name for e in thunder.get_default_executors()])
    import thunder.executors.utils as exutils
    calls = {"Region.__init__ -> order_proxies": 0, "bsyms": 0, "max subsymbol depth": 0}

    def depth(bsyms, d=1):
        return max([d] + [depth(b.subsymbols, d + 1) for b in bsyms if b.subsymbols])
    if hasattr(exutils, "order_proxies"):  # count the calls of the function the GPU host crashed in
        _orig = exutils.order_proxies
        def _counted(bsyms):
            calls["Region.__init__ -> order_proxies"] += 1
            calls["bsyms"] += len(bsyms)
            calls["max subsymbol depth"] = max(calls["max subsymbol depth"], depth(bsyms))
            return _orig(bsyms)
        exutils.order_proxies = _counted
    for i in range(args.warm):
        mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))
        jmlp = thunder.jit(mlp)
        for _ in range(2):
            jmlp(torch.randn(16, 32)).sum().backward()
    if args.warm:
        print(f"warm-up: {args.warm} MLP jits ran")
    model, ref = build(), build()
    jm = thunder.jit(model)
    for step in range(args.steps):
        x = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(step))
        try:
            y = jm(x)
        except NotImplementedError as e:
            if args.sdpa_claims and "_scaled_dot_product_efficient_attention" in str(e):
                tr = thunder.last_traces(jm)
                print(f"step {step}: traces built (forward {len(tr)} traces, backward {len(thunder.last_backward_traces(jm))}); "
                      f"executing the forward failed as expected on CPU: NotImplementedError aten::_scaled_dot_product_efficient_attention")
                print("forward trace symbols:", sorted({b.sym.name for b in tr[-1].bound_symbols}))
                print("backward trace symbols:", sorted({b.sym.name for b in thunder.last_backward_traces(jm)[-1].bound_symbols}))
                print("calls:", calls)
                print("OK (no crash in the fusion passes)")
                return
            raise
        y.sum().backward()
        yr = ref(x)
        yr.sum().backward()
        print(f"step {step}: fwd max|d| {(y - yr).abs().max().item():.3e}, "
              f"wq.grad max|d| {(model.wq.weight.grad - ref.wq.weight.grad).abs().max().item():.3e}")
    fwd = thunder.last_traces(jm)[-1]
    print("forward trace symbols:", sorted({b.sym.name for b in fwd.bound_symbols}))
    print("calls:", calls)
    print("OK")


if args.fork:
    import torch._dynamo, torch._inductor.compile_fx, torch._inductor.runtime.triton_heuristics  # noqa: F401
    print("parent: imported torch._dynamo, torch._inductor.compile_fx, torch._inductor.runtime.triton_heuristics; forking", flush=True)
    pid = os.fork()
    if pid == 0:
        try:
            main()
        except BaseException:
            import traceback; traceback.print_exc()
            sys.stdout.flush(); os._exit(1)
        sys.stdout.flush(); os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("child killed by signal", signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else None,
          "| exit status", os.WEXITSTATUS(status) if os.WIFEXITED(status) else None)
elif args.stack:
    threading.stack_size(args.stack * 1024 * 1024)
    t = threading.Thread(target=main)
    t.start(); t.join()
else:
    main()
