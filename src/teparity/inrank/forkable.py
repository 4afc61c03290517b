"""What a fork server imports once, before it forks ranks (``--teparity-ranks forked``): importing this
module in the fork server imports the first of ``fork_stages()`` (torch and TE: fork-safe, and imported
while the environment probe of a new stack may still run) and then what the probe found fork-safe beyond it
(``Environment.fork_modules``, ``teparity.stack.envprobe.fork_check``); each forked rank then imports only the rest
(``teparity.inrank.task.preload``). Nothing here touches CUDA. The time of each import goes to the
file that the fork server names in ``FORK_SERVER_LOG_VARIABLE`` (the bench adds it to the start-up it
reports).
"""

from __future__ import annotations

import os

from teparity.launch.fork_client import FORK_SERVER_LOG_VARIABLE
from teparity.stack.envprobe import environment, fork_stages, import_forkable

if path := os.environ.get(FORK_SERVER_LOG_VARIABLE):  # only in the fork server, which sets it while it imports this
    # The first stage (torch, TE) at once, while the probe may still run for a stack new to this machine;
    # then what the probe found fork-safe beyond it. Where nothing forks safely, ranks are spawned (the
    # plugin) and nothing forks from here but a test's pool.
    first = fork_stages()[0]
    timings = import_forkable(first)
    if (verified := environment().fork_modules)[:len(first)] == first:
        timings += import_forkable(verified[len(first):])
    with open(path, "a") as log:
        log.write(f"teparity fork server preload: {', '.join(timings)}\n")
