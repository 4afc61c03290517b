"""Reference sides reused (``teparity.gate.references``): a record is served only under its own key, and every part of
the key recomputes when it differs; a record that does not read back is computed again; the CPU gate judges alike
with and without reuse, and a reference computed again is the one stored, byte for byte."""

from __future__ import annotations

import ast
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

from teparity.gate import references
from teparity.gate.references import ReferenceStore, reference
from teparity.stack import since
from teparity.tools.gate_runs import run_gate
from harness import REPO


@dataclasses.dataclass(frozen=True)
class Spec:
    side: str = "torch"
    steps: int = 3


def reference_side(rank: int, world_size: int, spec: Spec) -> str:  # never run: the store's compute stands in
    raise AssertionError("not a rank function")


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A stack identity of the test's own, changed by the test in place (no torch needed)."""
    identity: dict[str, Any] = {"torch": "2.11.0", "te": "2.9.0", "te_files": "a", "gpus": ["NVIDIA H100 80GB HBM3"]}
    monkeypatch.setattr(references, "stack_identity", lambda: identity)
    monkeypatch.setattr(references, "teparity_source", lambda: "source")
    for name in [name for name in references.environment_in_key()]:
        monkeypatch.delenv(name)
    return identity


def _serve(store: ReferenceStore, spec: Spec = Spec(), *, world_size: int = 2, backend: str = "gloo") -> tuple[Any, str]:
    computed: list[Any] = []

    def compute(calls: list[Any]) -> list[Any]:
        computed.extend(calls)
        return [f"value of {call[1]}" for call in calls]

    value = store.serve([reference(reference_side, spec)], world_size, backend, compute)[0]
    return value, store.take_served()[0]["source"]


def _store(folder: Path, *, fresh: bool = False, thunder: str = "0.2.6") -> ReferenceStore:
    return ReferenceStore(folder, fresh, f"thunder {thunder}", thunder)


def test_a_record_is_reused_under_its_key_and_computed_again_where_any_part_differs(
        tmp_path: Path, stack: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    assert _serve(_store(tmp_path))[1] == "computed"
    assert _serve(_store(tmp_path, thunder="0.2.7.dev20260201")) == ("value of (Spec(side='torch', steps=3),)", "reused")
    changes = {
        "the spec": lambda: _serve(_store(tmp_path), Spec(steps=4)),
        "the world size": lambda: _serve(_store(tmp_path), world_size=4),
        "the backend": lambda: _serve(_store(tmp_path), backend="nccl"),
        "a thunder fact rank code reads": lambda: _serve(_store(tmp_path, thunder="0.2.4")),
    }
    for part, served in changes.items():
        assert served()[1] == "computed", part
    for field, other in (("torch", "2.12.1"), ("te", "2.20.2"), ("te_files", "rebuilt in place"), ("gpus", ["NVIDIA H200"])):
        kept = stack[field]
        stack[field] = other
        assert _serve(_store(tmp_path))[1] == "computed", field
        stack[field] = kept
    monkeypatch.setattr(references, "teparity_source", lambda: "another source")
    assert _serve(_store(tmp_path))[1] == "computed", "teparity's source"
    monkeypatch.setattr(references, "teparity_source", lambda: "source")
    monkeypatch.setenv("NVTE_TORCH_COMPILE", "0")
    assert _serve(_store(tmp_path))[1] == "computed", "an environment variable that changes what ranks compute"
    monkeypatch.delenv("NVTE_TORCH_COMPILE")
    assert _serve(_store(tmp_path))[1] == "reused", "the first key again"


def test_a_record_that_does_not_read_back_or_holds_another_key_is_computed_again(tmp_path: Path, stack: dict[str, Any]) -> None:
    _serve(_store(tmp_path))
    (record,) = tmp_path.glob("*.pickle")
    record.write_bytes(record.read_bytes()[:20])
    assert _serve(_store(tmp_path))[1] == "computed", "a truncated record"
    stored = pickle.loads(record.read_bytes())
    record.write_bytes(pickle.dumps({**stored, "key": {**stored["key"], "world_size": 8}}))
    assert _serve(_store(tmp_path))[1] == "computed", "a record of another key under this key's name"
    assert _serve(_store(tmp_path, fresh=True))[1] == "computed", "--teparity-fresh-reference"
    assert _serve(_store(tmp_path))[1] == "reused"


def test_an_argument_named_by_its_address_is_never_stored(tmp_path: Path, stack: dict[str, Any]) -> None:
    unstable = reference(reference_side, object())
    assert references.key(unstable, 2, "gloo", "0.2.6") is None
    assert references.key(reference(reference_side, Spec()), 2, "gloo", "0.2.6") is not None


def test_rank_code_reads_no_thunder_fact_but_the_declared_ones() -> None:
    """A reference is reused across thunder builds: rank code may read the installed thunder only through
    ``since.installed_thunder_reached``, which refuses a fact the key does not hold."""
    with pytest.raises(ValueError, match="RANK_READS"):
        since.installed_thunder_reached(since.THUNDERFX_SINCE)
    readers = []
    for path in sorted((REPO / "src/teparity/inrank").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                    "build_version", "installed_version", "placed") and "thunder" in ast.unparse(node):
                readers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not readers, f"rank code reads thunder's version outside since.installed_thunder_reached: {readers}"


#: torch DDP's run against thunder's DDP transform: the cheapest reference of the CPU gate.
CPU_REFERENCES = ["tests/trace/test_ddp_transform.py"]


def _bytes(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every leaf of a reference's records by its path: a tensor as its dtype, shape and bytes, anything else as is
    (pickle's own bytes depend on how objects are shared, not on what they hold)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [(path, (str(value.dtype), tuple(value.shape), value.contiguous().view(torch.uint8).numpy().tobytes()))]
    if dataclasses.is_dataclass(value):
        return [leaf for field in dataclasses.fields(value) for leaf in _bytes(getattr(value, field.name), f"{path}.{field.name}")]
    if isinstance(value, (list, tuple)):
        return [(path, len(value))] + [leaf for index, item in enumerate(value) for leaf in _bytes(item, f"{path}[{index}]")]
    if isinstance(value, dict):
        return [leaf for key in sorted(value, key=str) for leaf in _bytes(value[key], f"{path}.{key}")]
    return [(path, value)]


def _verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str, Any]]:
    return {t["nodeid"]: (t["outcome"], t["evidence"], t.get("numbers")) for r in report["results"] for t in r["tests"]}


def _sources(report: dict[str, Any]) -> set[str]:
    return {s["source"] for r in report["results"] for t in r["tests"] for s in t.get("reference") or []}


def test_the_cpu_gate_judges_alike_with_its_references_reused_and_recomputes_them_byte_for_byte(tmp_path: Path) -> None:
    """torch DDP's run: stored by a first run, reused by a second (verdicts, evidence and numbers identical), computed
    again by ``--teparity-fresh-reference`` into the same bytes."""
    pytest.importorskip("thunder")
    store = tmp_path / "store"
    option = f"--teparity-reference-store={store}"
    first = run_gate(CPU_REFERENCES, tmp_path, None, [option, "-p", "no:xdist"], name="first")
    assert first.returncode == 0, first.output[-3000:]
    assert _sources(first.report) == {"computed"}, first.report
    assert first.report["environment"]["references"].startswith(f"reference sides: reused from {store} under their key")
    stored = {path.name: _bytes(pickle.loads(path.read_bytes())["value"]) for path in store.glob("*.pickle")}
    assert len(stored) == 1, sorted(stored)
    second = run_gate(CPU_REFERENCES, tmp_path, None, [option, "-p", "no:xdist"], name="second")
    assert _sources(second.report) == {"reused"}, second.report
    assert _verdicts(second.report) == _verdicts(first.report)
    fresh = run_gate(CPU_REFERENCES, tmp_path, None, [option, "--teparity-fresh-reference", "-p", "no:xdist"], name="fresh")
    assert _sources(fresh.report) == {"computed"} and _verdicts(fresh.report) == _verdicts(first.report)
    assert {path.name: _bytes(pickle.loads(path.read_bytes())["value"]) for path in store.glob("*.pickle")} == stored


def test_a_record_no_run_used_for_two_weeks_leaves_the_store_and_a_used_one_stays(tmp_path: Path, stack: dict[str, Any]) -> None:
    import os
    import time

    _serve(_store(tmp_path), Spec(steps=3))
    _serve(_store(tmp_path), Spec(steps=4))
    month_ago = time.time() - 30 * 24 * 3600
    for path in tmp_path.iterdir():
        os.utime(path, (month_ago, month_ago))
    assert _serve(_store(tmp_path), Spec(steps=3))[1] == "reused"  # used again
    _store(tmp_path).prune()
    kept = [pickle.loads(path.read_bytes())["key"]["arguments"] for path in tmp_path.glob("*.pickle")]
    assert kept == [repr((Spec(steps=3),))], kept


@dataclasses.dataclass
class Raised:
    error: str | None


def test_a_reference_in_which_a_case_raised_is_computed_again(tmp_path: Path, stack: dict[str, Any]) -> None:
    store = _store(tmp_path)
    for outcome in ([[Raised("CUDA out of memory")], [Raised(None)]], [[Raised(None)], [Raised(None)]]):
        served = store.serve([reference(reference_side, Spec())], 2, "gloo", lambda calls: [outcome])
        assert served == [outcome] and store.take_served()[0]["source"] == "computed"
    assert _serve(_store(tmp_path))[1] == "reused"


def test_the_header_says_where_the_reference_sides_come_from() -> None:
    from teparity.gate.header import references_line
    from teparity.gate.settings import Settings

    run = Settings(timeout=180.0, world_size=2, backend_asked="gloo", ranks_asked="forked", sides="serial", report=None,
                   inject=(), longest_first=False, dist=None)
    assert references_line(run) == "reference sides: computed by this run (no store)"
    assert references_line(dataclasses.replace(run, reference_store="/s")).startswith("reference sides: reused from /s ")
    assert "(--teparity-fresh-reference) and stored in /s" in references_line(
        dataclasses.replace(run, reference_store="/s", fresh_reference=True))
