#!/usr/bin/env python3
"""Which collectives gloo runs on CUDA tensors with 2 ranks sharing cuda:0 (what the fsdp tier needs):
prints a table, collective: ok / the error. Run on the GPU host, from the repository root:

    python scripts/gloo_cuda_collectives_probe.py [WORLD_SIZE]

It needs torch only (teparity's src/ is put on the path). Its answer on torch 2.11.0 (every collective
runs) is behind the fsdp tier's skip on gloo with a GPU (``teparity.stack.reasons.fsdp_backend_unfit``).
Exit status 0 when every collective ran with the right values, 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from teparity.stack.collectives import OK, probe_gloo_cuda, table  # noqa: E402

if __name__ == "__main__":
    import torch

    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"torch {torch.__version__}, {gpu}; {world} gloo ranks on cuda:0")
    results = probe_gloo_cuda(world)
    print(table(results))
    sys.exit(0 if all(outcome == OK for outcome in results.values()) else 1)
