"""Which TE versions each thunder build's legacy TE executor accepts, as thunder itself decides it.

Every gate below was read in the build's own ``thunder/executors/transformer_engineex.py`` (from 0.2.6
on ``transformer_engine_v1ex.py``), at module level: ``TE_VERSION_X_Y_PLUS = LooseVersion(version(
"transformer_engine")) > LooseVersion("X.Y")``, and ``if not TE_VERSION_X_Y_PLUS:`` warns and sets
``TE_AVAILABLE = False``. The executor then claims no linear: the pair can only fall back to torch or
fail. The boundaries are the first and last weekly builds with that gate (docs/facts.md).

The comparison is LooseVersion's, not PEP 440's: ``> "1.8"`` accepts ``1.8.0`` (``[1, 8, 0] > [1,
8]``), ``1.8.0+3ec998e`` and ``1.8.0rc1``, but not ``1.8``; ``> "2.0"`` accepts ``2.0.0.dev0``, which
``packaging`` orders below 2.0. So the TE version is compared as thunder compares it, with the same
library.

Not listed, because they have no such gate: 0.1.0 .. 0.2.0.dev20240602 (version flags only) and the
functional executor of every build (``transformer_engine_v2ex``, the 0.2.6+ ``transformer_engineex``).
"""

from __future__ import annotations

import dataclasses

from looseversion import LooseVersion
from packaging.specifiers import SpecifierSet
from packaging.version import Version


@dataclasses.dataclass(frozen=True)
class TeGate:
    """One version gate: thunder builds in ``builds`` accept TE only where LooseVersion(TE) > ``above``."""

    builds: str
    above: str
    #: The flag that holds the gate and the builds it was read in.
    source: str

    def covers(self, thunder: Version) -> bool:
        return SpecifierSet(self.builds).contains(thunder, prereleases=True)

    def accepts(self, te: str) -> bool:
        return LooseVersion(te) > LooseVersion(self.above)

    def describe(self) -> str:
        return f"LooseVersion(TE) > LooseVersion('{self.above}') ({self.source})"


#: In order; the first gate whose builds contain the thunder version decides.
TE_GATES: tuple[TeGate, ...] = (
    # Published beside 0.2.2 (same executor file as 0.2.2), though PEP 440 orders it before dev20250209.
    TeGate("==0.2.2.dev0", "2.0", "TE_VERSION_2_0_PLUS, read in 0.2.2.dev0"),
    TeGate(">=0.2.0.dev20240609,<0.2.0.dev20240804", "1.6",
           "TE_VERSION_1_6_PLUS, read in 0.2.0.dev20240609 .. dev20240728"),
    TeGate(">=0.2.0.dev20240804,<0.2.0.dev20240922", "1.8",
           "TE_VERSION_1_8_PLUS, read in 0.2.0.dev20240804 .. dev20240915"),
    TeGate(">=0.2.0.dev20240922,<0.2.2.dev20250216", "1.9",
           "TE_VERSION_1_9_PLUS, read in 0.2.0.dev20240922 .. 0.2.2.dev20250209, 0.2.1 included"),
    TeGate(">=0.2.2.dev20250216,<0.2.7.dev20251130", "2.0",
           "TE_VERSION_2_0_PLUS, read in 0.2.2.dev20250216 .. 0.2.7.dev20251123; "
           "0.2.5 and 0.2.6 fail to import with TE 1.x"),
)


def gate_for(thunder: Version) -> TeGate | None:
    """The TE version gate of this thunder build's legacy executor, or None where it has none."""
    return next((gate for gate in TE_GATES if gate.covers(thunder)), None)
