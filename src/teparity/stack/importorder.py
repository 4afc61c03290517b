"""Make a process safe for TE 1.x's import-order clash before it imports anything of the stack.

With TransformerEngine's torch extension of TE 1.6 or 1.8 loaded, a later ``import matplotlib.ft2font``
raises ``SystemError: ... pybind11_detail_function_record_v1_..._abi_0 ... returned NULL`` (seen on a
hand-built TE 1.8.0 with thunder 0.2.0.dev20240728, whose import of igraph imports matplotlib; the other
order works; docs/facts.md, "Import order"). A user's program imports TE and thunder in either order, so
every process the gate starts imports ``ft2font`` first where a TE older than 1.9 is installed: then any
order works. ``import teparity`` does it, which is the first thing each of those processes does (the
pytest plugin, the environment probe, spawned and forked ranks, the fork server).

With ``TEPARITY_IMPORT_LOG`` set, each process appends one JSON line saying what it did and what of the
stack was already imported (the harness test reads it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

from teparity.stack.versions import build_version, parse_version

#: The first TE release whose extension does not break a later ft2font import (1.9: PyPI wheels; seen
#: with 1.6 and 1.8, the only 1.x builds run).
FIXED_IN = "1.9"
LOG_VARIABLE = "TEPARITY_IMPORT_LOG"
#: The modules whose order matters, as they appear in sys.modules.
WATCHED = ("transformer_engine", "transformer_engine_torch", "thunder", "matplotlib.ft2font")


def needs_ft2font_first() -> str | None:
    """Why this process must import ft2font first (an installed TE < 1.9 and matplotlib), or None."""
    te = build_version("transformer_engine")
    parsed = parse_version(te or "")
    if parsed is None or parsed.release >= parse_version(FIXED_IN).release:
        return None
    if importlib.util.find_spec("matplotlib") is None:
        return None
    return f"TransformerEngine {te} < {FIXED_IN} is installed"


def prepare() -> None:
    """Import ``matplotlib.ft2font`` where ``needs_ft2font_first``; log it under ``TEPARITY_IMPORT_LOG``."""
    already = [name for name in WATCHED if name in sys.modules]
    why = needs_ft2font_first()
    if why is not None:
        import matplotlib.ft2font  # noqa: F401
    if path := os.environ.get(LOG_VARIABLE):
        _log(path, {"pid": os.getpid(), "argv": sys.argv[:3], "imported_before": already,
                    "ft2font_first": why, "process": _process_name()})


def _process_name() -> str:
    """The multiprocessing name of this process (ranks are named ``teparity-*rank*``)."""
    module = sys.modules.get("multiprocessing")
    return module.current_process().name if module is not None else "MainProcess"


def _log(path: str, entry: dict[str, object]) -> None:
    with open(path, "a") as log:  # one short write per process: lines from several processes stay whole
        log.write(json.dumps(entry) + "\n")
