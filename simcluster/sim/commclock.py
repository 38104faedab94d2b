"""How long collectives ran on a GPU, so compute beside them can pay for the SMs they held.

:class:`CommClock` integrates the time at least one collective was in flight (a stage's DP
buckets, or one GPU's ZeRO gathers and reduce-scatters). A compute op that started with the
clocks at ``b0`` and ran its nominal time has overlapped ``busy(now) - b0`` seconds of them; it
then runs on for ``share`` of that overlap (:func:`extension_s`, :mod:`simcluster.perf.kernels.comm_sms`),
again until the extra time it owes is under :data:`TOLERANCE_S` or :data:`MAX_EXTENSIONS` passes
were made (each pass owes at most ``share`` times the one before).
"""

from __future__ import annotations

#: Owed seconds below which a compute op stops extending.
TOLERANCE_S = 1e-12
#: Extension passes per op at most (the owed time shrinks by ``share`` per pass).
MAX_EXTENSIONS = 4


class CommClock:
    """Seconds during which at least one collective was in flight."""

    __slots__ = ("_active", "_busy_s", "_since")

    def __init__(self) -> None:
        self._active = 0
        self._busy_s = 0.0
        self._since = 0.0

    def start(self, now: float) -> None:
        """A collective starts."""
        if self._active == 0:
            self._since = now
        self._active += 1

    def stop(self, now: float) -> None:
        """A collective ends."""
        self._active -= 1
        if self._active == 0:
            self._busy_s += now - self._since

    def busy(self, now: float) -> float:
        """Busy seconds from time 0 to ``now``."""
        return self._busy_s + (now - self._since if self._active else 0.0)


def extension_s(share: float, overlap_s: float, extended_s: float) -> float:
    """Seconds a compute op still owes: ``share`` of the collectives it overlapped, less what it
    has already run past its nominal time; 0 when under :data:`TOLERANCE_S`."""
    owed = share * overlap_s - extended_s
    return owed if owed > TOLERANCE_S else 0.0
