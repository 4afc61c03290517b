"""The versions of the systems under test, read from package metadata (no import, no CUDA)."""

from __future__ import annotations

import dataclasses
import importlib.metadata

from packaging.version import InvalidVersion, Version


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` without importing it (None when absent)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@dataclasses.dataclass(frozen=True)
class Versions:
    """Versions of the systems under test."""

    torch: str | None
    thunder: str | None
    transformer_engine: str | None

    @classmethod
    def installed(cls) -> Versions:
        return cls(
            torch=installed_version("torch"),
            thunder=installed_version("lightning-thunder"),
            transformer_engine=installed_version("transformer_engine"),
        )

    def describe(self) -> str:
        return (
            f"torch {self.torch or 'absent'}, lightning-thunder {self.thunder or 'absent'}, "
            f"TransformerEngine {self.transformer_engine or 'absent'}"
        )
