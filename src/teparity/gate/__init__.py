"""The gate around the tiers: how a test runs ranks (``ranks``) and parity pairs (``pairs``), which
failures are known upstream defects (``known_defects``), the parity report (``report``) and the
compatibility matrix rendered from reports (``matrix``). ``teparity.plugin`` wires them into pytest."""
