"""The signatures of FP8 states reduced outside the fp8 group (``ReducedOutsideTheGroup``): thunder's state equal
across the world where eager TE's differs between groups, and an executor that does not honor the group."""

from __future__ import annotations

from teparity.judge.failures import ReducedOutsideTheGroup, ReducedOutsideTheGroupEvidence
from teparity.known.defect import Signature
from teparity.stack.environment import Environment


def _group_ignored(evidence: ReducedOutsideTheGroupEvidence, env: Environment) -> bool:
    return evidence["thunder_equal_across_world"] and not env.executors[evidence["executor"]].honors_fp8_group


# -- the signatures -------------------------------------------------------------------------------

AUTOCAST_WITHOUT_GROUP = Signature(
    ReducedOutsideTheGroup,
    _group_ignored,
    "thunder's FP8 state is identical on every rank (reduced over the world) where eager TE's "
        "differs between fp8 groups, and the executor's autocast wrapper names no fp8_group",
)
UPDATE_WITHOUT_GROUP = Signature(
    ReducedOutsideTheGroup,
    _group_ignored,
    "thunder's FP8 state is identical on every rank (reduced over the world) where eager TE's "
        "differs between fp8 groups, and the executor's update does not ask TE for the group",
)
