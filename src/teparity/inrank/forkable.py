"""What a fork server imports once, before it forks ranks (``--teparity-ranks forked``): importing this
module in the fork server runs ``teparity.stack.envprobe.import_forkable`` (torch, and TE where it is
installed, else thunder); each forked rank then imports only the rest (``teparity.inrank.task.preload``).
Nothing here touches CUDA (``torch.cuda.is_available()`` itself would mark the children unfit). The
time of each import goes to the file that the fork server names in ``FORK_SERVER_LOG_VARIABLE`` (the bench
adds it to the start-up it reports).
"""

from __future__ import annotations

import os

from teparity.launch.forkserver import FORK_SERVER_LOG_VARIABLE
from teparity.stack.envprobe import import_forkable

if path := os.environ.get(FORK_SERVER_LOG_VARIABLE):  # only in the fork server, which sets it while it imports this
    timings = import_forkable()
    with open(path, "a") as log:
        log.write(f"teparity fork server preload: {', '.join(timings)}\n")
