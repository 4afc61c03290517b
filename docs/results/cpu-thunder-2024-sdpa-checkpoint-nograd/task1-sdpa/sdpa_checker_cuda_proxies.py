"""Drive thunder's SDPA executor checker (thunder/executors/sdpaex.py _scaled_dot_product_attention_checker)
with CUDA-device TensorProxies on a CPU-only machine, i.e. the path a CUDA llama block takes at trace time,
up to and including the SDPAParams(...) construction. Usage: PYTHONPATH=<thunder dir> python sdpa_checker_cuda_proxies.py"""
import importlib.metadata, platform, traceback
import torch, thunder
from thunder.core.trace import TraceCtx, tracectx
from thunder.core.proxies import TensorProxy
from thunder.core import devices, dtypes
import thunder.executors.sdpaex as sdpaex

# CPU-only machine: thunder's Device("cuda:0") checks torch.cuda.device_count(); pretend one GPU so that CUDA
# proxies can be made (no CUDA call is made by the code below up to SDPAParams(...)).
torch.cuda.device_count = lambda: 1

# Log each SDPAParams construction (thunder imports it from torch.backends.cuda inside _fused_sdp_choice).
import torch.backends.cuda as tbc
_real = tbc.SDPAParams
print("torch.backends.cuda.SDPAParams has enable_gqa:", hasattr(_real, "enable_gqa"))
def _logged(*a):
    print(f"SDPAParams called with {len(a)} positional args")
    r = _real(*a)
    print("SDPAParams constructed OK")
    return r
if hasattr(_real, "enable_gqa"):  # keep what thunder >= dev20240804 probes with hasattr(SDPAParams, "enable_gqa")
    _logged.enable_gqa = _real.enable_gqa
tbc.SDPAParams = _logged

print(f"python {platform.python_version()} torch {torch.__version__} thunder {importlib.metadata.version('lightning-thunder')} cuda available {torch.cuda.is_available()}")
print("sdpaex from", sdpaex.__file__)
trc = TraceCtx()
with tracectx(trc):
    q, k, v = (TensorProxy(shape=(2, 4, 16, 16), device=devices.Device("cuda:0"), dtype=dtypes.float32, requires_grad=True) for _ in range(3))
    try:
        ok = sdpaex._scaled_dot_product_attention_checker(q, k, v, None, 0.0, True, scale=None)
        print("checker returned", ok)
    except Exception as e:
        print("checker raised", type(e).__name__)
        traceback.print_exc(limit=-3)
