"""thunder.jit (default executors, CPU) of teparity's CheckpointedMLP: three bias-free Linears, the first two run under
torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False), then the last Linear; forward + backward.
The model is copied from /work/main/src/teparity/inrank/models.py (plain_mlp, CheckpointedMLP) at 4306794.
Usage: PYTHONPATH=<thunder dir> python checkpoint_cpu.py"""
import importlib.metadata, platform, traceback
import torch
import torch.utils.checkpoint
import thunder

print(f"python {platform.python_version()} torch {torch.__version__} thunder {importlib.metadata.version('lightning-thunder')}")


class CheckpointedMLP(torch.nn.Sequential):
    def forward(self, x):
        return self[-1](torch.utils.checkpoint.checkpoint(self._head, x, use_reentrant=False))

    def _head(self, x):
        for layer in list(self)[:-1]:
            x = layer(x)
        return x


def plain_layers(sizes=(48, 64, 32, 16), seed=0):
    # teparity's activation-checkpointing case (tests/features/test_feature_parity.py): sizes (48, 64, 32, 16),
    # bias=False, activation=None, fp32, input (16, 48)
    g = torch.Generator().manual_seed(seed)
    layers = []
    for fi, fo in zip(sizes, sizes[1:]):
        lin = torch.nn.Linear(fi, fo, bias=False)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(fo, fi, generator=g) / fi ** 0.5)
        layers.append(lin)
    return layers


model = CheckpointedMLP(*plain_layers())
ref = CheckpointedMLP(*plain_layers())
x = torch.randn(16, 48, generator=torch.Generator().manual_seed(1))
try:
    jm = thunder.jit(model)
    y = jm(x)
    y.sum().backward()
    yr = ref(x)
    yr.sum().backward()
    print(f"RESULT ok: fwd max|d| {(y - yr).abs().max().item():.3e}, grad[0] max|d| {(model[0].weight.grad - ref[0].weight.grad).abs().max().item():.3e}")
    fwd = thunder.last_traces(jm)[-1]
    print("fwd trace symbols:", [b.sym.name for b in fwd.bound_symbols])
except Exception as e:
    tb = traceback.format_exc()
    c = e.__cause__
    if c is not None:
        print("CAUSE (innermost frames):")
        print("".join(traceback.format_exception(type(c), c, c.__traceback__)[-8:]))
    print(tb[-1500:])
    print("RESULT error:", type(e).__name__, str(e).splitlines()[0][:300])
