"""The environment teparity gives its ranks, unless the user set the variable: one OpenMP thread and
in-process inductor compiles.

Why the threads: a GPU gate run at ``-n 12`` holds about 24 rank processes on 16 cores. Left to their
defaults, each sized its intra-op pool to every core, and each that compiled anything (TE's
``torch.compile``d amax update, thunder's torch.compile fusions) started its own inductor compile pool (a
sidecar process with one worker per core). torchrun sets ``OMP_NUM_THREADS=1`` for the same reason.

Not ``PYTORCH_NVML_BASED_CUDA_CHECK=1``: it was a default for a while, so that a fork server could preload
thunder, but on the H200 a child forked after thunder's import still could not use CUDA (docs/facts.md, the
ninth session).

Neither changes what is computed: inductor emits the same kernels in-process, and both sides of a pair
run with the same threads.
"""

from __future__ import annotations

import os

#: The variables teparity sets for its ranks when the environment does not, and their values.
DEFAULTS: dict[str, str] = {"OMP_NUM_THREADS": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}


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
