"""Option types that refuse a bad value with a usage error that says why (pytest's options and the
``python -m teparity`` commands share them): never a traceback, never a failing test."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


class UsageError(ValueError):
    """Arguments a ``python -m teparity`` command cannot run with: it exits 2 with this message, never a traceback."""


def positive(kind: type[int | float]) -> Callable[[str], Any]:
    """A number above zero."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def whole_number(minimum: int, too_few: str) -> Callable[[str], int]:
    """A count of at least ``minimum``; ``too_few`` formats the refusal of a smaller one."""

    def parse(text: str) -> int:
        try:
            count = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if count < minimum:
            raise argparse.ArgumentTypeError(too_few.format(count))
        return count

    return parse
