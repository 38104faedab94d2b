"""Sweeps: every valid layout, hardware option and checkpoint interval of a scenario, ranked.

``simcluster sweep`` and :func:`simcluster.sweep` (a pandas DataFrame). Layer 8 of
docs/architecture.md: it drives ``run`` (the analytical step, the DES re-rank, the reliability
engine) and is driven by ``cli``.
"""
