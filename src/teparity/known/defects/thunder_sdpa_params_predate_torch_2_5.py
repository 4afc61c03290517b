"""Known upstream defect ``thunder-sdpa-params-predate-torch-2.5``: a thunder/torch pairing: thunder builds up to
0.2.0.dev20240728 call torch's _SDPAParams with the 6 arguments of torch 2.4, which torch 2.5+ refuses: every
program with scaled-dot-product attention fails to trace on a CUDA device."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="thunder-sdpa-params-predate-torch-2.5",
    summary="a thunder/torch pairing: thunder builds up to 0.2.0.dev20240728 call torch's _SDPAParams with the 6 "
    "arguments of torch 2.4, which torch 2.5+ refuses: every program with scaled-dot-product attention fails to trace "
    "on a CUDA device",
    executors=("legacy", "functional"),
    signature=signatures.SDPA_PARAMS_OF_SIX,
    checks=checks.LLAMA_RUNS,
    thunder=">=0.2.0.dev20240404,<0.2.0.dev20240804",
    te=">=1.6",
    torch=">=2.5",
    cause="thunder/executors/sdpaex.py's checker builds SDPAParams with torch 2.4's 6 arguments; torch 2.5 added "
    "enable_gqa, passed from 0.2.0.dev20240804. Not a TE defect: a build older than its torch (TE 1.6-1.8 hosts have torch "
    "2.4). Read in dev20240404 .. dev20240728; on the CPU with CUDA proxies torch 2.11 raises, 2.4.1 does not "
    "(docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd); run on the GPU with TE 1.8.0",
    seen=("docs/results/h200-te1.8.0-4306794", "docs/results/h200-te1.8.0-b4f3e73"),
    fixed=(FixSeen("thunder", "<0.2.0.dev20240804", "docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd/task1-sdpa/scan_sdpaparams.log"),),
)
