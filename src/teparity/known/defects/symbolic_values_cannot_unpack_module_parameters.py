"""Known upstream defect ``symbolic-values-cannot-unpack-module-parameters``: thunder.jit(cache='symbolic values') of a
module raises NotImplementedError on its first call: the interpreter cannot unpack a parameter's shape from its
provenance."""

from __future__ import annotations

from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="symbolic-values-cannot-unpack-module-parameters",
    summary="thunder.jit(cache='symbolic values') of a module raises NotImplementedError on its first call: the "
    "interpreter cannot unpack a parameter's shape from its provenance",
    executors=("legacy", "functional"),
    signature=signatures.SYMBOLIC_VALUES_CANNOT_UNPACK,
    checks=("new-input-shape[sequence-length-symbolic-values]", "new-input-shape[short-last-batch-symbolic-values]"),
    thunder=">=0.2.1,<0.2.7.dev20251123",
    te=">=1.6",
    without_te=True,
    cause="thunder/core/proxies.py tensorproxy() gives every tensor symbolic shapes under CACHE_OPTIONS.SYMBOLIC_VALUES, "
    "a torch.nn.Parameter's too, and unpacking `_modules['0']._parameters['weight'].shape[0]` from its provenance "
    "raises. 0.2.7.dev20251123 keeps a parameter's shape static (read in the wheels). Without TE on the CPU: every "
    "release 0.2.1 .. 0.2.6 and weekly build up to 0.2.7.dev20251116 raises, dev20251123 and dev20251130 work "
    "(docs/results/cpu-bisect-symbolic-values); where it works one cache entry serves every shape, and the TE FP8 "
    "state follows eager TE's",
    seen=("docs/results/h200-te2.9.0-13aaff2-combinations", "docs/results/h200-te2.20.2-640b276-combinations", "docs/results/cpu-bisect-symbolic-values"),
    fixed=(FixSeen("thunder", "<0.2.7.dev20251123", "docs/results/cpu-bisect-symbolic-values/verdicts.json"),),
)
