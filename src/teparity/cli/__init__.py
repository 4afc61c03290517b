"""``python -m teparity``: the commands around the gate (``parser``: their options; ``doctor``, ``reports`` and
``runs``: what each does)."""
