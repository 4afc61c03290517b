"""The parity report: its format (``parity``: the JSON, a test's outcome and evidence, the verdict), its terminal table
and footnotes (``table``), evidence cut to what a report keeps (``evidence``), and a run judged against another
(``relative``: against its base, and ``python -m teparity diff``). The gate writes it; the tools and commands read it."""
