"""The versions of the systems under test, read from package metadata (no import, no CUDA) and placed in the version
space (``teparity.stack.placement``: a source build reads as the nightly of its commit's date)."""

from __future__ import annotations

import dataclasses
import importlib.metadata

from typing import Any

from packaging.version import InvalidVersion, Version

from teparity.stack.placement import Placement, placed


def installed_version(distribution: str) -> str | None:
    """The version ``distribution``'s metadata reports, without importing it (None when absent): for what it says, or
    whether it is installed. Compare ``build_version``'s."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def build_version(distribution: str) -> str | None:
    """The version the gate compares for an installed build of ``distribution`` (None when absent): its metadata's,
    or for a source build the one it is placed at (``teparity.stack.placement``)."""
    found = placed(distribution)
    return None if found is None else found.version


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@dataclasses.dataclass(frozen=True)
class Versions:
    """Versions of the systems under test, as the gate compares them (``build_version``), and the source builds among
    them with what their metadata says."""

    torch: str | None
    thunder: str | None
    transformer_engine: str | None
    #: The builds placed by their source (``teparity.stack.placement.Placement``); reports before placement have none.
    sources: tuple[Placement, ...] = ()

    def __post_init__(self) -> None:  # from JSON: a list of dicts
        object.__setattr__(self, "sources", tuple(p if isinstance(p, Placement) else Placement(**p) for p in self.sources))

    @classmethod
    def installed(cls) -> Versions:
        found = {name: placed(name) for name in ("torch", "lightning-thunder", "transformer_engine")}
        version = {name: None if p is None else p.version for name, p in found.items()}
        return cls(torch=version["torch"], thunder=version["lightning-thunder"],
                   transformer_engine=version["transformer_engine"],
                   sources=tuple(p for p in found.values() if p is not None and p.source is not None))

    def installed_as(self, distribution: str) -> str | None:
        """What ``distribution``'s metadata says: its version, or for a source build the version it reports (which
        a comparison of thunder's own, such as its TE gate, reads)."""
        field = {"torch": self.torch, "lightning-thunder": self.thunder, "transformer_engine": self.transformer_engine}
        source = next((p for p in self.sources if p.distribution == distribution), None)
        return source.installed if source is not None else field[distribution]

    def placements(self) -> list[str]:
        """Each source build, how it was placed: ``lightning-thunder 0.2.7.dev0: a source tree at ... read as ...``."""
        return [p.words() for p in self.sources]

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "sources": [dataclasses.asdict(placed) for placed in self.sources]}

    def describe(self) -> str:
        def said(distribution: str, version: str | None) -> str:
            installed = self.installed_as(distribution)
            return (version or "absent") if installed == version else f"{installed} (read as {version})"

        return (
            f"torch {said('torch', self.torch)}, lightning-thunder {said('lightning-thunder', self.thunder)}, "
            f"TransformerEngine {said('transformer_engine', self.transformer_engine)}"
        )
