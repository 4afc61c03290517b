"""The registry at work in a process that runs tests: each gate test is tagged with its report row (check and
executor); a test that a known upstream defect covers on the installed stack becomes a strict xfail that expects
only that defect's signature, and a failure is judged against the registry as it happens (package metadata
only at collection: no import)."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from teparity import checks
from teparity.report.parity import BOUNDED_PROPERTY, COVERING_PROPERTY, KNOWN_PROPERTY, NEAR_MISS_PROPERTY, ROW_PROPERTY
from teparity.gate.settings import probed_environment
from teparity.known import registry
from teparity.known.defect import KnownDefect, NearMiss
from teparity.stack.versions import Versions

#: The registry entries that cover an item on the installed stack.
_COVERED = pytest.StashKey[list[KnownDefect]]()


def covering(item: pytest.Item) -> list[KnownDefect]:
    """The registry entries that cover ``item`` on the installed stack (none where it is no gate test)."""
    return item.stash.get(_COVERED, [])


def row_of(item: pytest.Item) -> tuple[str, str | None] | None:
    """The report row of a gate test and its executor; None for a test that is no gate check. The row is the
    marker's check (``teparity.checks``; a callable of the test's parameters where the check itself depends on
    them) and its parameter part, a format over the test's parameters: ``check(NUMERICS, "{recipe_id}")``."""
    marker = item.get_closest_marker("check")
    if marker is None:
        return None
    params = item.callspec.params if hasattr(item, "callspec") else {}
    check, *parameters = marker.args
    name = check(params) if callable(check) else check
    return checks.row(name, *parameters).format(**params), params.get("executor")


def in_rows(item: pytest.Item, patterns: tuple[str, ...]) -> bool:
    """Whether ``item`` is a gate test of a report row that one of ``patterns`` names (``checks.matches``)."""
    return (tagged := row_of(item)) is not None and any(checks.matches(pattern, tagged[0]) for pattern in patterns)


class KnownMarks:
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        versions = Versions.installed()
        for item in items:
            if (row := row_of(item)) is None:
                continue
            check, executor = row
            item.user_properties.append((ROW_PROPERTY, {"check": check, "executor": executor}))
            if entries := registry.covering(check, executor, versions):
                item.stash[_COVERED] = entries
                item.user_properties.append((COVERING_PROPERTY, [e.id for e in entries]))
                item.add_marker(pytest.mark.xfail(
                    strict=True, raises=tuple(e.seen_type for e in entries), reason=" | ".join(e.reason() for e in entries)
                ))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """A fixture that runs the check's ranks (the legacy sync scenarios) is judged as the test body is."""
        with _judging(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """A failure that matches a covering entry's signature becomes that entry's own exception type (what its
        strict xfail expects); one that matches an entry outside its version ranges still fails, as a
        ``NearMiss`` that names the entry and the range; any other failure propagates unchanged."""
        with _judging(item):
            return (yield)


@contextlib.contextmanager
def _judging(item: pytest.Item) -> Iterator[None]:
    """Raise what ``_judged`` makes of a failure inside (the failure itself, unchanged, where it is neither)."""
    try:
        yield
    except BaseException as error:
        if (judged := _judged(item, error)) is error:
            raise
        raise judged from error


def _judged(item: pytest.Item, error: BaseException) -> BaseException:
    """``error`` as the registry sees it: the matching entry's own type, a ``NearMiss``, or itself."""
    env = probed_environment()
    entry = registry.match(item.stash.get(_COVERED, []), error, env)
    if entry is not None:
        item.user_properties.append((KNOWN_PROPERTY, entry.id))
        if entry.signature.bounded:
            item.user_properties.append((BOUNDED_PROPERTY, True))
        return entry.seen_type(f"[known upstream defect {entry.id}] {error}")
    tag = dict(item.user_properties).get(ROW_PROPERTY)
    versions = Versions.installed()
    near = registry.near_misses(tag["check"], tag["executor"], versions, error, env) if tag else []
    if not near:
        return error
    item.user_properties.append((NEAR_MISS_PROPERTY, near[0].id))
    return NearMiss(f"{registry.near_miss_message(near[0], versions, item.nodeid)} {error}")
