"""Closed-form, cited performance formulas: parameters, FLOPs, memory, compute, collectives, pipeline.

Pure functions of specs; the discrete-event engine uses them for durations and tests use them as
oracles.
"""
