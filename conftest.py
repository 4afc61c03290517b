"""Load the teparity plugin for in-repo runs (no pytest11 entry point: see docs/conventions.md)."""

pytest_plugins = ("teparity.plugin",)
