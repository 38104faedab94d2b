"""The hot-spare pool: spares on hand, nodes in repair, replacement latency when the pool is empty.

A failed node goes to repair (lognormal time, drawn in the sample path) and returns to the pool,
which never holds more than its nominal size (a surplus node goes back to the provider). A claim
takes spares first; the missing nodes arrive ``replace_s`` after the claim (docs/reliability.md,
"The model": WAIT).
"""

from __future__ import annotations

import heapq


class SparePool:
    """Spare nodes on hand and nodes coming back from repair.

    Parameters
    ----------
    spares : int
        Nominal pool size (hot spares at the start).
    replace_s : float
        Time to get a node from outside when no spare is free (s).
    """

    def __init__(self, spares: int, replace_s: float) -> None:
        self.size, self.free, self.replace_s = spares, spares, replace_s
        self.returns: list[tuple[float, int]] = []
        self.exhausted = 0

    def send_to_repair(self, back_t: float, nodes: int) -> None:
        """``nodes`` failed nodes come back to the pool at ``back_t``."""
        heapq.heappush(self.returns, (back_t, nodes))

    def claim(self, t: float, nodes: int) -> tuple[float, int]:
        """Claim ``nodes`` at ``t``; returns (time all are ready, how many were missing)."""
        while self.returns and self.returns[0][0] <= t:
            self.free = min(self.size, self.free + heapq.heappop(self.returns)[1])
        taken = min(self.free, nodes)
        self.free -= taken
        missing = nodes - taken
        if missing == 0:
            return t, 0
        self.exhausted += 1
        return t + self.replace_s, missing
