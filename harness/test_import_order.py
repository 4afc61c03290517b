"""Every process the gate starts imports ``matplotlib.ft2font`` before TE where a TE < 1.9 is installed,
so that thunder (which imports matplotlib) and TE import in either order (``teparity.stack.importorder``).

On this CPU runner TE 1.8 and matplotlib are stand-ins on the path: a dist-info that says 1.8.0 and
packages that log their own import, with the processes' names, to ``TEPARITY_IMPORT_LOG``.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.multirank

_LOGGING_IMPORT = """
import json, multiprocessing, os, sys
with open(os.environ["TEPARITY_IMPORT_LOG"], "a") as log:
    log.write(json.dumps({{"imported": {name!r}, "pid": os.getpid(), "process": multiprocessing.current_process().name,
                          "ft2font_loaded": "matplotlib.ft2font" in sys.modules}}) + "\\n")
"""


def _stand_ins(site: Path) -> None:
    """TE 1.8.0 (metadata and package) and matplotlib, each logging its import."""
    (site / "transformer_engine-1.8.0.dist-info").mkdir(parents=True)
    (site / "transformer_engine-1.8.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: transformer_engine\nVersion: 1.8.0\n"
    )
    for package, name in (("transformer_engine", "transformer_engine"), ("matplotlib", "matplotlib")):
        (site / package).mkdir()
        (site / package / "__init__.py").write_text(_LOGGING_IMPORT.format(name=name))
    (site / "transformer_engine" / "pytorch").mkdir()
    (site / "transformer_engine" / "pytorch" / "__init__.py").write_text("")
    (site / "matplotlib" / "ft2font.py").write_text(_LOGGING_IMPORT.format(name="matplotlib.ft2font"))


def test_every_gate_process_imports_ft2font_before_te_1x(pytester: pytest.Pytester, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    site, log = tmp_path / "site", tmp_path / "imports.jsonl"
    _stand_ins(site)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{__import__('os').environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("TEPARITY_IMPORT_LOG", str(log))
    pytester.makepyfile(test_processes=textwrap.dedent("""
        import pytest
        from teparity.inrank import faults, forkable
        from teparity.launch.fresh import run_ranks
        from teparity.launch.rank_pool import RankPool
        from teparity.stack.envprobe import environment

        TE_FIRST, THUNDER_FIRST = ["transformer_engine", "thunder"], ["thunder", "transformer_engine"]

        @pytest.mark.parametrize("start", ["probe", "fresh", "warm", "forked"])
        def test_start(start, tmp_path):
            if start == "probe":
                assert environment().versions.transformer_engine == "1.8.0"
                return
            order = TE_FIRST if start == "fresh" else THUNDER_FIRST
            if start == "fresh":
                results = run_ranks(faults.import_in_order, order, world_size=2, backend="gloo", workdir=tmp_path)
            else:
                pool = RankPool(2, "gloo", 60.0, tmp_path, fork_preload=(forkable.__name__,) if start == "forked" else None)
                try:
                    results = pool.run(faults.import_in_order, (order,), timeout=120)
                finally:
                    pool.close()
            assert [r["ft2font loaded"] for r in results] == ["True", "True"], results
    """))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "teparity.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    guarded = [e for e in entries if "ft2font_first" in e]
    imports = [e for e in entries if e.get("imported") == "transformer_engine"]
    assert guarded and all(e["ft2font_first"] == "TransformerEngine 1.8.0 < 1.9 is installed" for e in guarded), guarded
    assert all(not e["imported_before"] for e in guarded), [e for e in guarded if e["imported_before"]]
    late = [e for e in imports if not e["ft2font_loaded"]]
    assert imports and not late, f"TE imported before ft2font in: {late}"
    # The processes: pytest and its 2 workers, the probe, 2 fresh and 2 warm ranks, and a fork server per
    # worker (which imported TE for the forked ranks, whose own import found it loaded).
    ranks = {e["process"] for e in imports if "rank" in e["process"]}
    assert ranks == {"teparity-rank0", "teparity-rank1", "teparity-warm-rank0", "teparity-warm-rank1"}, ranks
    assert len({e["pid"] for e in guarded}) >= 8, guarded
    assert len({e["pid"] for e in imports}) >= len(ranks) + 2, imports  # + the probe and a fork server
