"""No-grad forward of a Linear-GELU-Linear model under thunder.jit on CPU, with a stand-in for the legacy TE
executor: an OperatorExecutor that registers prims.linear (checker always True, an execution transform and a
grad transform), exactly the registration shape of thunder/executors/transformer_engineex.py
(`transformer_engine_ex.register_implementation(prims.linear, checker=..., execution_transform=..., grad_transform=...)`),
placed first in the executor list as teparity does: executors=[fake_te, *thunder.get_default_executors()].
It reports, for a grad-enabled and a torch.no_grad() forward: whether thunder built a backward trace
(split_forward_backward ran), which symbol names the final execution trace holds, and whether fake_te claimed.
Usage: PYTHONPATH=<thunder dir> python nograd_claims.py"""
import importlib.metadata, platform
import torch, thunder
from thunder.extend import OperatorExecutor, register_executor
from thunder.core.proxies import TensorProxy
import thunder.core.prims as prims

print(f"python {platform.python_version()} torch {torch.__version__} thunder {importlib.metadata.version('lightning-thunder')}")

fake_te = OperatorExecutor("fake_te", version="0")
register_executor(fake_te)


def _meta(a, w, b):
    return TensorProxy(like=a, shape=(*a.shape[:-1], w.shape[0]))


fake_te_linear = fake_te.register_operator("fake_te_linear", meta=_meta, fn=torch.nn.functional.linear)
fake_te_linear_bwd = fake_te.register_operator(
    "fake_te_linear_bwd",
    meta=lambda g, a, w: (TensorProxy(like=a), TensorProxy(like=w), TensorProxy(like=g, shape=(w.shape[0],))),
    fn=lambda g, a, w: (g @ w, g.t() @ a, g.sum(0)),
)


def _transform(a, w, b):
    return fake_te_linear(a, w, b)


def _grad(a, w, b):
    out = fake_te_linear(a, w, b)
    g = prims.get_grad(out)
    ga, gw, gb = fake_te_linear_bwd(g, a, w)
    prims.put_grad(a, ga)
    prims.put_grad(w, gw)
    if b is not None:
        prims.put_grad(b, gb)
    return out


fake_te.register_implementation(prims.linear, checker=lambda a, w, b: True, execution_transform=_transform, grad_transform=_grad)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))


x = torch.randn(8, 32)
for mode in ("grad", "no_grad"):
    m = model()
    jm = thunder.jit(m, executors=[fake_te, *thunder.get_default_executors()])
    if mode == "no_grad":
        with torch.no_grad():
            y = jm(x)
    else:
        y = jm(x)
    fwd = thunder.last_traces(jm)[-1]
    bwd = thunder.last_backward_traces(jm)
    names = [b.sym.name for b in fwd.bound_symbols]
    claimed = sum(n == "fake_te_linear" for n in names)
    print(f"{mode:8s}: backward trace built: {bool(bwd)}; fake_te_linear in forward trace: {claimed}; "
          f"'linear' (ltorch, torch executor) in forward trace: {sum(n == 'linear' for n in names)}; "
          f"out.requires_grad {y.requires_grad}; max|d| vs eager {(y - m(x)).abs().max().item():.1e}")
    print(f"          forward trace symbols: {names}")
