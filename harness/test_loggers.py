"""pytest walks logging's logger registry at every test phase, while the gate's threads create loggers (an
import of torch after collection once ended an xdist worker with INTERNALERROR: "dictionary changed size
during iteration"). The plugin makes the registry's walks copies."""

from __future__ import annotations

import pytest


def test_a_logger_created_during_pytests_walk_of_the_registry_fails_no_test(pytester: pytest.Pytester) -> None:
    """A logger that creates another each time pytest's walk reads it stands for a thread that creates one
    mid-walk, on every walk rather than by chance."""
    pytester.makeconftest("""
        import itertools
        import logging

        pytest_plugins = ("teparity.plugin",)
        created = itertools.count()


        class GrowsTheRegistry(logging.Logger):
            @property
            def propagate(self):
                logging.getLogger(f"created-mid-walk-{next(created)}")
                return True

            @propagate.setter
            def propagate(self, value):
                pass


        logging.Logger.manager.loggerDict["grows-the-registry"] = GrowsTheRegistry("grows-the-registry")
    """)
    pytester.makepyfile("""
        import logging

        def test_one():
            assert "created-mid-walk-0" in logging.Logger.manager.loggerDict  # the walk before this call read it

        def test_two():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
