"""How thunder recomputes a checkpointed region's GELUs, on the CPU without TE: Linear-GELU-Linear-GELU under
torch.utils.checkpoint (non-reentrant), then a last Linear, compiled by thunder.jit and by thunderfx. Prints one JSON
line per compile path (how many erf the backward computes: 0 where every region GELU's cdf is the forward's, saved)
and writes each backward trace to OUT/THUNDER-PATH.txt. usage: PYTHONPATH=<thunder build> python gelu_remat_probe.py OUT"""
import json, os, sys
from importlib.metadata import version

import thunder, torch, torch.utils.checkpoint as checkpoint


class Region(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(a, b, bias=False) for a, b in ((48, 64), (64, 32), (32, 16)))
        self.gelu = torch.nn.GELU()

    def head(self, x):
        return self.gelu(self.linears[1](self.gelu(self.linears[0](x))))

    def forward(self, x):
        return self.linears[2](checkpoint.checkpoint(self.head, x, use_reentrant=False))


def backward_traces(path: str) -> list[str]:
    torch.manual_seed(0)
    module, x = Region(), torch.randn(2, 8, 48, requires_grad=True)
    if path == "jit":
        jitted = thunder.jit(module)
        jitted(x).sum().backward()
        return [str(thunder.last_backward_traces(jitted)[-1])]
    from thunder.dynamo import thunderfx
    compiled = thunderfx(module)
    compiled(x).sum().backward()
    return [str(thunder.last_backward_traces(fn)[-1]) for sub in compiled._backend.subgraph_infos for fn in sub.thunder_compiled_fns]


if __name__ == "__main__":
    out, build = sys.argv[1], version("lightning-thunder")
    os.makedirs(out, exist_ok=True)
    for path in ("jit", "thunderfx"):
        traces = backward_traces(path)
        with open(os.path.join(out, f"{build}-{path}.txt"), "w") as f:
            f.write("\n".join(traces))
        erf = sum(line.count("torch.erf(") for trace in traces for line in trace.splitlines() if not line.lstrip().startswith("#"))
        print(json.dumps({"thunder": build, "torch": torch.__version__, "path": path, "backward_erf": erf}), flush=True)
