"""The suite's own tests: teparity's library, its tools and its documents, tested on the CPU (and, marked ``fp8``, on a
GPU). ``REPO`` is the checkout they test."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
