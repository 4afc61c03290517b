"""Print torch._C._SDPAParams' constructor signature and try 6 and 7 positional arguments (CPU tensors).
Usage: <venv>/bin/python sdpaparams_signature.py"""
import platform, torch
print(f"python {platform.python_version()} torch {torch.__version__}")
print("__init__ doc:", torch._C._SDPAParams.__init__.__doc__.strip().splitlines()[0])
print("has enable_gqa attribute:", hasattr(torch._C._SDPAParams, "enable_gqa"))
q = k = v = torch.zeros(1, 1, 4, 8)
for extra in ((), (False,)):
    try:
        torch._C._SDPAParams(q, k, v, None, 0.0, True, *extra)
        print(f"{6 + len(extra)} args: OK")
    except TypeError as e:
        print(f"{6 + len(extra)} args: TypeError: {str(e).splitlines()[0]}")
