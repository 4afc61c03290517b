"""The environment teparity gives its ranks, unless the user set the variable: one OpenMP thread,
in-process inductor compiles, and torch's CUDA availability check through NVML.

Why the threads: a GPU gate run at ``-n 12`` holds about 24 rank processes on 16 cores. Left to their
defaults, each sized its intra-op pool to every core, and each that compiled anything (TE's
``torch.compile``d amax update, thunder's torch.compile fusions) started its own inductor compile pool (a
sidecar process with one worker per core). torchrun sets ``OMP_NUM_THREADS=1`` for the same reason.

Why NVML: ``torch.cuda.is_available()`` initialises the CUDA driver (``cudaGetDeviceCount``), after which
no forked child can use CUDA; thunder's import asks it (``thunder/executors/nvfuserex.py``), so a fork
server could not preload thunder. With ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` torch answers through NVML and
leaves the driver alone (torch's documented fork-safe check), and the fork server preloads thunder and the
compiler too (``teparity.stack.versions.fork_stages``); the environment probe checks on each machine
that a child forked after those imports still runs CUDA.

None of these changes what is computed: inductor emits the same kernels in-process, both sides of a pair
run with the same threads, and the NVML check answers the same question where CUDA works.
"""

from __future__ import annotations

import os

#: The variable that makes ``torch.cuda.is_available()`` fork-safe.
NVML_CHECK_VARIABLE = "PYTORCH_NVML_BASED_CUDA_CHECK"
#: The variables teparity sets for its ranks when the environment does not, and their values.
DEFAULTS: dict[str, str] = {"OMP_NUM_THREADS": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1", NVML_CHECK_VARIABLE: "1"}


def apply_defaults() -> frozenset[str]:
    """Set each of ``DEFAULTS`` that the environment lacks, before any rank, fork server, environment probe
    or xdist worker starts (they inherit it); returns the names it set."""
    missing = frozenset(name for name in DEFAULTS if name not in os.environ)
    for name in missing:
        os.environ[name] = DEFAULTS[name]
    return missing


def in_force(set_here: frozenset[str]) -> dict[str, str]:
    """Each variable's value, and who set it (``set_here``: the names ``apply_defaults`` set)."""
    return {name: f"{os.environ.get(name, '')} ({'teparity default' if name in set_here else 'environment'})" for name in DEFAULTS}
