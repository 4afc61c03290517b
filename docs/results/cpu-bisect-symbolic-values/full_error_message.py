"""Prints the whole message of the first-call error of symbolic_values.py (that script prints only its first line)."""
import torch, thunder
net = torch.nn.Sequential(torch.nn.Linear(32, 64, bias=False), torch.nn.Linear(64, 16, bias=False))
jitted = thunder.jit(net, cache="symbolic values")
try:
    jitted(torch.randn(2, 16, 32, requires_grad=True)).sum().backward()
    print("first call OK")
except Exception as e:
    print(str(e))
