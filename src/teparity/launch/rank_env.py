"""The environment teparity gives its ranks, unless the user set the variable: one OpenMP thread,
in-process inductor compiles, and torch's NVML-based CUDA check.

Why the threads: a GPU gate run at ``-n 12`` holds about 24 rank processes on 16 cores. Left to their
defaults, each sized its intra-op pool to every core, and each that compiled anything (TE's
``torch.compile``d amax update, thunder's torch.compile fusions) started its own inductor compile pool (a
sidecar process with one worker per core). torchrun sets ``OMP_NUM_THREADS=1`` for the same reason.

Why the NVML check (``PYTORCH_NVML_BASED_CUDA_CHECK=1``): inductor's import calls ``torch.cuda.is_available()``
(``torch/_inductor/runtime/benchmarking.py``), which otherwise asks the CUDA runtime for the device count,
and torch then marks every child forked later unfit for CUDA. With it the count comes from NVML, so the fork
server can import inductor's compiler once for all its ranks (``teparity.stack.envprobe.fork_stages``; the
environment probe checks on each machine that a child forked after it still runs CUDA). It does not make
thunder's import fork-safe where TE is installed (docs/facts.md).

None of them changes what is computed: inductor emits the same kernels in-process, both sides of a pair
run with the same threads, and the NVML check only changes how ``is_available`` counts the GPUs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: The variables teparity sets for its ranks when the environment does not, and their values.
DEFAULTS: dict[str, str] = {
    "OMP_NUM_THREADS": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
}


def apply_defaults() -> frozenset[str]:
    """Set each of ``DEFAULTS`` that the environment lacks, before any rank, fork server, environment probe
    or xdist worker starts (they inherit it); returns the names it set."""
    missing = frozenset(name for name in DEFAULTS if name not in os.environ)
    os.environ.update({name: DEFAULTS[name] for name in missing})
    return missing


def with_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with each of ``DEFAULTS`` that it lacks: the environment a run's ranks get, for a process
    that starts their fork server before the run (``teparity.tools.served``)."""
    return {**DEFAULTS, **environ}


def in_force(set_here: frozenset[str]) -> dict[str, str]:
    """Each variable's value, and who set it (``set_here``: the names ``apply_defaults`` set)."""
    return {name: f"{os.environ.get(name, '')} ({'teparity default' if name in set_here else 'environment'})" for name in DEFAULTS}
