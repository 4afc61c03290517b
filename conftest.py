"""Load the teparity plugin for in-repo runs (no pytest11 entry point: see CONVENTIONS.md)."""

pytest_plugins = ("teparity.plugin",)
