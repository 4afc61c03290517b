"""thunder.jit(cache="symbolic values") of two bias-free linears, three calls with input shapes (2,16,32), (2,32,32), (2,16,32), each with a backward; prints the verdict."""
import importlib.metadata, sys
import torch, thunder
print("thunder", importlib.metadata.version("lightning-thunder"), "torch", torch.__version__)
net = torch.nn.Sequential(torch.nn.Linear(32, 64, bias=False), torch.nn.Linear(64, 16, bias=False))
jitted = thunder.jit(net, cache="symbolic values")
for shape in ((2, 16, 32), (2, 32, 32), (2, 16, 32)):
    x = torch.randn(shape, requires_grad=True)
    try:
        jitted(x).sum().backward()
    except Exception as error:
        print(f"RAISES: {type(error).__name__}: {str(error).splitlines()[0]}")
        sys.exit(1)
print(f"WORKS: {thunder.cache_misses(jitted)} cache entries for 3 calls of 2 shapes")
