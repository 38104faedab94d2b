"""Flat, frozen records of what a simulated step did: one per op, wait or transfer.

They are the event log (golden tests hash or print them), the input of the critical path and of
the ledger, and the source of Chrome traces and Gantt charts. Times are seconds from step start.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class OpRecord(NamedTuple):
    """One op on a stream of a simulated device (an immutable named tuple: cheap to create by
    the hundred thousand, and a flat row for DataFrames).

    Attributes
    ----------
    eid : int
        Order of completion (deterministic).
    group : str
        Replica class (``"nominal"`` or the perturbed replica, e.g. ``"dp3"``).
    stage : int
        Pipeline stage.
    stream : str
        ``compute``, ``p2p`` or ``dp``.
    name : str
        ``F``/``B``/``W`` with chunk and micro-batch (``F c0 mb3``), ``send``, ``bucket``,
        ``wait`` (idle gaps on the compute stream), ``optimizer`` ...
    category : str
        Main ledger category of the op (``compute``, ``pp_comm``, ``dp_comm``, ``bubble`` ...).
    start_s, end_s : float
        Interval, seconds.
    parts : tuple[tuple[str, float], ...]
        Seconds per ledger category inside the op; on the compute stream they sum to its
        duration. On ``p2p``/``dp`` streams: the transfer's work alone on idle links (its
        duration minus that is the stretch from sharing links).
    gate : int
        ``eid`` of the record that released this one (-1 at step start): the critical-path link.
    """

    eid: int
    group: str
    stage: int
    stream: str
    name: str
    category: str
    start_s: float
    end_s: float
    parts: tuple[tuple[str, float], ...] = ()
    gate: int = -1

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``."""
        return self.end_s - self.start_s

    def as_dict(self) -> dict[str, Any]:
        """Plain-value dict (for DataFrames and JSON)."""
        return self._asdict()
