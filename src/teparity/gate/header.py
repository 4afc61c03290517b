"""The report header: what is under test, how it runs, and what is known to fail on it."""

from __future__ import annotations

import os

from teparity.gate.settings import Settings
from teparity.report.table import HEADER_INDENT, wrapped
from teparity.known.registry import extrapolated, extrapolation_line, registered_for
from teparity.stack import reasons
from teparity.stack.environment import Environment
from teparity.stack.provenance import teparity_commit
from teparity.stack.versions import Versions


def te_settings() -> dict[str, str]:
    """The ``NVTE_*`` variables of this run: they change TE's numerics (``NVTE_UNFUSED_FP8_UPDATE`` swaps the
    fused scale update for the Python one), so a report that omits them misleads."""
    return {name: value for name, value in sorted(os.environ.items()) if name.startswith("NVTE_")}


def header_lines(settings: Settings, env: Environment, launch: str, rank_environment: dict[str, str]) -> list[str]:
    """The header, each line within the terminal report's width (a long one continues, indented)."""
    return [line for said in _said(settings, env, launch, rank_environment) for line in wrapped(said, indent=HEADER_INDENT)]


def _said(settings: Settings, env: Environment, launch: str, rank_environment: dict[str, str]) -> list[str]:
    gpus = ", ".join(g.describe() for g in env.gpus) or "none"
    lines = [
        f"teparity: {env.versions.describe()}",
        *(f"teparity: placed by its source: {placed}" for placed in env.versions.placements()),
        f"teparity: judged by {teparity_commit()}",
        f"teparity: GPUs: {gpus}; FP8: {reasons.no_fp8(env) or 'yes'}",
        f"teparity: world size {settings.world_size}, backend {settings.backend}, harness deadline {settings.timeout:g} s, "
        f"{launch}, sides {settings.sides}",
        *(f"teparity: TE executor {info.label()}" for info in env.executors.values()),
        f"teparity: distribution: {settings.distribution()}",
        "teparity: rank environment: " + ", ".join(f"{k}={v}" for k, v in rank_environment.items()),
        f"teparity: {references_line(settings)}",
    ]
    if reasons.thunder_absent(env):
        lines.append(f"teparity: NO THUNDER, every check skips ({reasons.ALLOW_NO_THUNDER})" if settings.allow_no_thunder
                     else "teparity: THE GATE CANNOT TEST HERE (no lightning-thunder): it stops at start-up, red")
    if broken := reasons.import_failure(env):
        lines.append(f"teparity: THE SYSTEM UNDER TEST DOES NOT IMPORT (every gate test fails): {broken}")
    if unsupported := reasons.unsupported_pair(env):
        lines.append(f"teparity: AN UNSUPPORTED PAIR (every gate test fails): {unsupported}")
    if reasons.no_fp8(env) is None:
        unfit = reasons.fsdp_backend_unfit(settings.backend, len(env.gpus))
        lines.append("teparity: fsdp tier reference: " + (f"torch DDP + eager TE, since {unfit}" if unfit else
                                                           "torch FSDP2 (fully_shard) + eager TE"))
    if settings.inject:
        lines.append(f"teparity: INJECTED REGRESSIONS (the gate should fail): {', '.join(settings.inject)}")
    if settings.rows:
        lines.append(f"teparity: ONLY THESE ROWS (--teparity-rows; the other tests deselected): {', '.join(settings.rows)}")
    if nvte := te_settings():
        lines.append(f"teparity: TE settings from the environment: {nvte}")
    if registered := registered_for(Versions.installed()):
        lines.append(
            f"teparity: known upstream defects on these versions (strict xfails on their signature; --runxfail "
            f"runs them as plain tests): {', '.join(registered)}"
        )
    if line := extrapolation_line(extrapolated(Versions.installed()), base_held(settings.base)):
        lines.append(line)
    return lines


def references_line(settings: Settings) -> str:
    """Where the run's reference sides come from (``teparity.gate.references``)."""
    from teparity.launch.torchrun import torchrun_world

    if settings.reference_store is None or torchrun_world() is not None:
        return "reference sides: computed by this run (no store)"
    if settings.fresh_reference:
        return f"reference sides: computed by this run (--teparity-fresh-reference) and stored in {settings.reference_store}"
    return (f"reference sides: reused from {settings.reference_store} under their key where stored, else computed and "
            "stored (--teparity-fresh-reference computes them all)")


def base_held(base: str | None) -> set[str]:
    """The registry entries the base's report held (known there, or by extrapolation): a run against its base says
    nothing more of them. Empty without a base, or where it is no report (the option's check says so)."""
    from teparity.report.parity import NotAReport, read_report

    try:
        report = read_report(base) if base else None
    except NotAReport:
        return set()
    if report is None:
        return set()
    held = {item.split(" ", 1)[0] for item in report.environment.get("known_defects_extrapolated") or []}
    return held | {test.known_defect for cell in report.cells.values() for test in cell.tests if test.known_defect}
