"""thunder 0.2.0.dev20240818 .. dev20240901 die of SIGSEGV while they compile a llama block on a CUDA device: the
torchcompile_cat executor (a default executor from dev20240818, CUDA only) makes a Region of the rotary embedding's cat,
and ordering its proxies (order_proxies in thunder/core/transform_common.py, optree's tree_iter over the region's
symbols) kills the interpreter, under fusion_pass (executors/torch_compile.py). Cause not established: seen on an H200
with TE 1.8.0, torch 2.11.0, Python 3.12; not on the CPU. One llama-style block (RMSNorm, causal SDPA with rotary
embeddings, SwiGLU MLP; fp32), one step of eager TE (te.Linear projections), then thunder.jit with the legacy TE
executor first, forward and backward, in a child process whose death this script watches (up to ATTEMPTS children).
Needs an FP8 GPU (compute capability 8.9 or newer) and TransformerEngine."""
import copy
import importlib.metadata
import importlib.util
import signal
import subprocess
import sys

import torch

DIM, HIDDEN, HEAD, SHAPE = 64, 128, 16, (2, 16, 64)
PROJECTIONS = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")
ATTEMPTS = 3  # a run may raise instead of dying (dev20240901, TE 1.8.0: SystemError "returned NULL" in its compile)
#: Where the legacy executor lives (module, attribute; its module defines TELinear), newest thunder first.
CANDIDATES = [("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex"),
              ("thunder.executors.transformer_engineex", "transformer_engine_ex")]


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def _module(name: str):
    return importlib.import_module(name) if importlib.util.find_spec(name) is not None else None


class RMSNorm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Block(torch.nn.Module):
    """Pre-norm attention with rotary embeddings (the rotate-half form: a cat) and a SwiGLU MLP, projections bias-free."""

    def __init__(self, max_seq: int = 64) -> None:
        super().__init__()
        self.attention_norm = RMSNorm()
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(DIM, DIM, bias=False) for _ in range(4))
        self.ffn_norm = RMSNorm()
        self.w1, self.w3 = (torch.nn.Linear(DIM, HIDDEN, bias=False) for _ in range(2))
        self.w2 = torch.nn.Linear(HIDDEN, DIM, bias=False)
        angles = torch.outer(torch.arange(max_seq).float(), 1.0 / (10000 ** (torch.arange(0, HEAD, 2).float() / HEAD)))
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def rotary(self, x: torch.Tensor) -> torch.Tensor:
        cos, sin = (table[: x.shape[1]].to(x.dtype)[None, :, None, :] for table in (self.cos, self.sin))
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        h = self.attention_norm(x)
        q = self.rotary(self.wq(h).view(batch, seq, dim // HEAD, HEAD)).transpose(1, 2)
        k = self.rotary(self.wk(h).view(batch, seq, dim // HEAD, HEAD)).transpose(1, 2)
        v = self.wv(h).view(batch, seq, dim // HEAD, HEAD).transpose(1, 2)
        attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(attention.transpose(1, 2).reshape(batch, seq, dim))
        h = self.ffn_norm(x)
        return x + self.w2(torch.nn.functional.silu(self.w1(h)) * self.w3(h))


def child() -> None:
    """The crashing program: eager TE's step, then thunder's; exit 0 where thunder ran, 3 where it raised."""
    try:
        import thunder  # before TE: TE 1.x's extension loaded first breaks a later matplotlib import (thunder's)
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    executor = next((getattr(_module(m), a) for m, a in CANDIDATES if hasattr(_module(m), "TELinear")), None)
    if executor is None:
        cannot("this thunder has no legacy TE executor")
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, "
          f"torch {torch.__version__}", flush=True)
    (torch.zeros(1, device="cuda", requires_grad=True) * 1).sum().backward()  # autograd's thread gets a CUDA context
    torch.manual_seed(4)
    net = Block().cuda()
    eager = copy.deepcopy(net)
    for name in PROJECTIONS:
        linear = getattr(net, name)
        setattr(eager, name, te.Linear(linear.in_features, linear.out_features, bias=False, device="cuda"))
        with torch.no_grad():
            getattr(eager, name).weight.copy_(linear.weight)
    recipe, x = DelayedScaling(), torch.randn(SHAPE, device="cuda")
    fp8 = te.autocast(enabled=True, recipe=recipe) if hasattr(te, "autocast") else te.fp8_autocast(enabled=True, fp8_recipe=recipe)
    with fp8:
        expected = eager(x)
    expected.sum().backward()
    print("eager TE ran the block; thunder.jit compiles it now", flush=True)
    jitted = thunder.jit(net, executors=[executor, *thunder.get_default_executors()], te_fp8_recipe=recipe)
    try:
        got = jitted(x)  # the legacy executor wraps its forward in fp8_autocast itself
        got.sum().backward()
    except Exception as error:  # noqa: BLE001
        print(f"thunder raised {type(error).__name__}: {' '.join(str(error).split())[:300]}", flush=True)
        sys.exit(3)
    print(f"thunder ran the block: max |output - eager TE's| {(got - expected).abs().max().item():.3g}", flush=True)
    sys.exit(0)


def main() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    for attempt in range(1, ATTEMPTS + 1):  # stop at a SIGSEGV, a run that compiled, or one that cannot run here
        try:
            done = subprocess.run([sys.executable, "-X", "faulthandler", __file__, "--child"], capture_output=True,
                                  text=True, timeout=600)
        except subprocess.TimeoutExpired:
            sys.exit(print("NOT REPRODUCED: the child ran past 600 s (another defect: a hang)") or 1)
        print(f"attempt {attempt} of {ATTEMPTS}:", done.stdout.rstrip(), sep="\n")
        if done.returncode in (-signal.SIGSEGV, 0, 2):
            break
    if done.returncode == 2:
        sys.exit(2)  # the child said why it cannot run here, last
    stack = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("File ")]
    if done.returncode == -signal.SIGSEGV:
        print("the child died of SIGSEGV; its stack, innermost first:", *stack[:8], sep="\n  ")
        if any(" in order_proxies" in line for line in stack) and any(
                "torch_compile.py" in line and " in fusion_pass" in line for line in stack):
            print("REPRODUCED: thunder dies of SIGSEGV in order_proxies under the torchcompile_cat executor's fusion_pass "
                  "while it compiles the llama block")
            sys.exit(0)
        print("NOT REPRODUCED: a SIGSEGV, but not in order_proxies under torchcompile_cat's fusion_pass (another defect)")
    elif done.returncode in (0, 3):
        print("NOT REPRODUCED: " + ("thunder compiled and ran the llama block" if done.returncode == 0 else
                                    f"thunder raised instead of crashing, {ATTEMPTS} times (another defect: above)"))
    else:
        how = f"died of signal {-done.returncode}" if done.returncode < 0 else f"exited {done.returncode}"
        print(done.stderr[-3000:].rstrip(), f"NOT REPRODUCED: the child {how}, not of SIGSEGV in thunder's compile "
              "(another failure: above)", sep="\n")
    sys.exit(1)

if __name__ == "__main__":
    child() if sys.argv[1:] == ["--child"] else main()
