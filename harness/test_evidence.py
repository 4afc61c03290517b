"""A failure's evidence in the report, the summary and the job summary keeps why each rank failed: the exception
type and message of every failed rank and the frames nearest the raise, however deep the traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from teparity.report.evidence import EVIDENCE_CHARS, excerpt, exception_lines
from teparity.inrank import faults
from teparity.launch.fresh import run_ranks
from teparity.launch.outcome import RanksFailed

#: What gloo says when a peer never sends (the cause a multi-rank failure's report lost).
TIMEOUT = "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Timed out waiting 60000ms for recv operation"


@pytest.mark.multirank
def test_a_deep_traceback_on_every_rank_keeps_each_rank_exception_and_its_end(tmp_path: Path) -> None:
    with pytest.raises(RanksFailed) as failed:
        run_ranks(faults.raise_deep_on_every_rank, 120, TIMEOUT, world_size=2, backend="gloo", workdir=tmp_path)
    message = str(failed.value)
    assert len(message) > 4 * EVIDENCE_CHARS, "the traceback must be deeper than a report keeps"
    assert f"rank 1: {TIMEOUT}" not in message[:EVIDENCE_CHARS], "a head-first cut loses the cause: the test shows nothing"
    kept = excerpt(message)
    assert len(kept) <= EVIDENCE_CHARS, len(kept)
    assert kept.splitlines()[0] == message.splitlines()[0], "the header: how many ranks failed, and how"
    for rank in (0, 1):
        assert f"--- rank {rank}: raised ---" in kept
        assert f"RuntimeError: rank {rank}: {TIMEOUT}" in kept, kept
    tail = kept.rsplit("characters cut ...]", 1)[1]
    assert "raise RuntimeError(message)" in tail, "the frame nearest the raise"
    assert "re-run: " in kept, "the footer"


def test_exception_lines_are_the_first_line_of_each_traceback_exception_chained_or_indented() -> None:
    def raised(error: BaseException) -> str:
        import traceback

        try:
            raise error
        except BaseException as caught:  # noqa: BLE001
            return "".join(traceback.format_exception(caught))

    try:
        raise KeyError("t43")
    except KeyError:
        chained = raised(RuntimeError("outer\nits second line"))  # during the handling of the KeyError
    text = "before\n" + chained + textwrap.indent(raised(TypeError("nested in a message")), "      ") + "after\n"
    assert exception_lines(text) == ["KeyError: 't43'", "RuntimeError: outer", "TypeError: nested in a message"]

def test_short_evidence_is_kept_whole_and_a_long_message_without_ranks_keeps_head_cause_and_end() -> None:
    assert excerpt("short") == "short"
    body = "\n".join(f"difference {n}" for n in range(400))
    text = f"PartedFromEager: 400 differences\n{body}\nTraceback (most recent call last):\n  File \"x.py\", line 1\n" \
           f"ValueError: the cause\nre-run: python -m pytest t.py"
    kept = excerpt(text)
    assert len(kept) <= EVIDENCE_CHARS
    assert kept.startswith("PartedFromEager: 400 differences\ndifference 0\n")
    assert "ValueError: the cause" in kept and kept.endswith("re-run: python -m pytest t.py")


def test_the_report_and_the_job_summary_carry_each_failed_rank_exception(pytester: pytest.Pytester) -> None:
    """Through pytest: a multi-rank failure with a deep traceback on each rank, as the JSON report and
    ``teparity summary`` (the Action's job summary) give it."""
    pytester.makepyfile(test_ranks=f"""
        import traceback
        import pytest
        from teparity.launch.outcome import RankFailure, RanksFailed

        def deep(n, rank):
            if n:
                deeper(n - 1, rank)
            raise RuntimeError(f"rank {{rank}}: {TIMEOUT}")

        def deeper(n, rank):
            deep(n, rank)

        def traceback_of(rank):
            try:
                deep(150, rank)
            except RuntimeError:
                return traceback.format_exc()

        @pytest.mark.check("alpha")
        def test_ranks():
            failures = [RankFailure(rank, "raised", "raised", traceback_of(rank)) for rank in (0, 1)]
            raise RanksFailed(failures, pids=[], header="2 of 2 ranks failed (deep, backend gloo)", footer="re-run: here")
        """)
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "--teparity-report", "r.json")
    result.assert_outcomes(failed=1)
    evidence = json.loads((pytester.path / "r.json").read_text())["results"][0]["tests"][0]["evidence"]
    summary = subprocess.run([sys.executable, "-m", "teparity", "summary", "r.json"], cwd=pytester.path,
                             capture_output=True, text=True).stdout
    for rank in (0, 1):
        assert f"RuntimeError: rank {rank}: {TIMEOUT}" in evidence, evidence
        assert f"RuntimeError: rank {rank}: {TIMEOUT}" in summary, summary
    assert "in deep" in evidence.rsplit("characters cut ...]", 1)[1]
