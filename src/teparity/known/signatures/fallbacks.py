"""The signatures of silent fallbacks to torch (``SilentFallback``): no linear held by TE, told apart by what the
executor's own TE imports say (``teparity.stack.executors.ExecutorInfo``)."""

from __future__ import annotations

from teparity.judge.failures import SilentFallback, SilentFallbackEvidence
from teparity.known.defect import Signature
from teparity.stack.environment import Environment


def _legacy_module_lost_te(evidence: SilentFallbackEvidence, env: Environment) -> bool:
    """No linear held, and the legacy executor module's TE import names CPUOffloadEnabled: its checker declines
    every linear, for the legacy executor and for the functional one of the builds that borrow it."""
    failed = env.executors["legacy"].te_imports_failed or ""
    return evidence["claimed"] == 0 and "CPUOffloadEnabled" in failed


def _no_grad_left_to_torch(evidence: SilentFallbackEvidence, env: Environment) -> bool:
    return evidence["claimed"] == 0 and not env.executors[evidence["executor"]].te_imports_failed


# -- the signatures -------------------------------------------------------------------------------

LEGACY_MODULE_LOST_TE = Signature(
    SilentFallback,
    _legacy_module_lost_te,
    "no linear is held by TE and the executor module's own TE import error names CPUOffloadEnabled",
)
LEGACY_CHECKER_LOST_TE = Signature(
    SilentFallback,
    _legacy_module_lost_te,
    "no linear is held by TE and the legacy executor module's own TE import error names CPUOffloadEnabled",
)
CURRENT_SCALING_LEFT_TO_TORCH = Signature(
    SilentFallback,
    _no_grad_left_to_torch,
    "no linear is held by TE, and the executor's TE imports did not fail",
)
NO_GRAD_LEFT_TO_TORCH = Signature(
    SilentFallback,
    _no_grad_left_to_torch,
    "no linear is held by TE, and the executor's TE imports did not fail",
)
