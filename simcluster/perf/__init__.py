"""Closed-form, cited performance formulas: parameters, FLOPs, memory, compute, collectives, pipeline.

Pure functions of specs; the discrete-event engine uses them for durations and tests use them as
oracles. The ones a layout sweep repeats are memoised (:mod:`.cache`); :func:`clear_caches`
empties those caches and changes no result.
"""

from simcluster.perf.cache import clear_caches

__all__ = ["clear_caches"]
