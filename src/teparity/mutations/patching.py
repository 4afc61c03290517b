"""What the patches share: the factor a perturbed scale is off by, and a proxy that changes one member of a
module-level object for the module's own code only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PERTURBATION = 1 + 2**-10


def override(module: Any, attribute: str, member: str, replacement: Callable[..., Any]) -> None:
    """Put in place of the ``attribute`` of ``module`` a proxy that delegates everything but ``member``: the
    change reaches only code that looks the name up in ``module`` (thunder's, not eager TE's)."""
    real = getattr(module, attribute)

    class Override:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    setattr(Override, member, staticmethod(replacement))
    setattr(module, attribute, Override())
