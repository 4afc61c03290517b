"""What a fork server imports once, before it forks ranks (``--teparity-ranks forked``): importing this
module in the fork server imports the modules the environment probe found fork-safe here
(``Environment.fork_modules``: torch, TE, and where ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` leaves fork usable
thunder and inductor's compiler; ``teparity.stack.envprobe.fork_check``); each forked rank then imports only
the rest (``teparity.inrank.task.preload``). Nothing here touches CUDA. The time of each import goes to the
file that the fork server names in ``FORK_SERVER_LOG_VARIABLE`` (the bench adds it to the start-up it
reports).
"""

from __future__ import annotations

import os

from teparity.launch.forkserver import FORK_SERVER_LOG_VARIABLE
from teparity.stack.envprobe import environment, import_forkable
from teparity.stack.versions import fork_stages

if path := os.environ.get(FORK_SERVER_LOG_VARIABLE):  # only in the fork server, which sets it while it imports this
    # Where no stage forks safely, ranks are spawned (the plugin) and nothing forks from here but a test's
    # pool: the first stage is what a server imported before stages were probed.
    timings = import_forkable(environment().fork_modules or fork_stages()[0])
    with open(path, "a") as log:
        log.write(f"teparity fork server preload: {', '.join(timings)}\n")
