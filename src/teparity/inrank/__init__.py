"""Code that runs inside a rank and returns plain data (``teparity.records``): the two sides of a parity
run (``sides.run_eager``, ``sides.run_thunder``), the legacy-sync scenarios, the networks, the FP8-state
readers, the sync spy, and ``task``, which the gate wraps around each of them. No asserts here: an
assert on one rank while another waits in a collective is a hang; the parent judges (``teparity.judge``).
"""
