"""Observation of simulations: a time ledger, flat records and pluggable tracers.

``sim/`` talks only to the :class:`~.tracer.Tracer` protocol (``NullTracer`` by default) and to a
:class:`~.ledger.Ledger`; nothing here knows about SimPy (observation is injected).
"""

from simcluster.observe.ledger import CATEGORIES, Ledger
from simcluster.observe.records import OpRecord
from simcluster.observe.tracer import ChromeTracer, NullTracer, Tracer, write_text_atomic

__all__ = ["CATEGORIES", "ChromeTracer", "Ledger", "NullTracer", "OpRecord",
           "Tracer", "write_text_atomic"]
