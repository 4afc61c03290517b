"""What a fork server imports once, before it forks ranks (``--teparity-ranks forked``):
``teparity.stack.versions.forkable_modules()`` (torch, and TE where it is installed, else thunder); each
forked rank then imports only the rest (``teparity.inrank.task.preload``). Nothing here touches CUDA
(``torch.cuda.is_available()`` itself would mark the children unfit). An import that fails is left to
the rank, which then raises it with its own traceback. The time of each import goes to the file
that the pool names in ``FORK_SERVER_LOG_VARIABLE`` (the bench adds it to the start-up it reports).
"""

from __future__ import annotations

import importlib
import os
import time

from teparity.launch.pool import FORK_SERVER_LOG_VARIABLE
from teparity.stack.versions import forkable_modules


def preload() -> list[str]:
    """Import ``forkable_modules()``; their timings as the ranks log theirs (``"import torch 2.91 s"``)."""
    timings = []
    for name in forkable_modules():
        clock = time.monotonic()
        try:
            importlib.import_module(name)
        except Exception:  # the rank imports it again and fails with the whole traceback
            pass
        timings.append(f"import {name.split('.')[0]} {time.monotonic() - clock:.2f} s")
    return timings


def _main() -> None:
    """Run as the fork server's preload (importing this module is the preload)."""
    timings = preload()
    if path := os.environ.get(FORK_SERVER_LOG_VARIABLE):
        with open(path, "a") as log:
            log.write(f"teparity fork server preload: {', '.join(timings)}\n")


if os.environ.get(FORK_SERVER_LOG_VARIABLE):  # only in the fork server, which the pool starts with this set
    _main()
