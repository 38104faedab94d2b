"""Max-min fair bandwidth sharing by progressive filling (water-filling) over directed links.

Flow *classes* share links; a class stands for ``multiplicity`` identical flows and crosses each
link it uses ``weight`` times per flow (1 for a plain route; ``k`` when a ring channel's hops cross
the link ``k`` times; ``1/s`` per spine when a flow is sprayed over ``s`` spines). All unfrozen
classes rise at one common per-flow rate; a link saturates when ``sum_j m_j a_ij r_j = c_i``; the
classes crossing a saturated link freeze at the current level, and the others keep rising
(Bertsekas and Gallager, *Data Networks*, 2nd ed., section 6.5.2; the LMM solver of SimGrid,
Velho and Legrand, SIMUTools 2009). The incidence is stored as COO arrays (link, class, weight),
so one round costs O(non-zeros) with numpy (docs/collectives.md, "Solver").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

#: Relative tolerance under which a link counts as saturated in the same round.
SATURATION_RTOL = 1e-12


def max_min_rates(link_of: IntArray, class_of: IntArray, weight: FloatArray,
                  capacity_Bps: FloatArray, multiplicity: FloatArray,
                  active: NDArray[np.bool_] | None = None) -> FloatArray:
    """Per-flow max-min fair rates of flow classes on shared links (progressive filling).

    Parameters
    ----------
    link_of, class_of : ndarray of int
        COO incidence: entry ``e`` says class ``class_of[e]`` crosses link ``link_of[e]``.
    weight : ndarray of float
        Crossings per flow of entry ``e`` (> 0).
    capacity_Bps : ndarray of float
        Capacity of each link, bytes/s (>= 0).
    multiplicity : ndarray of float
        Identical flows per class (>= 1); each gets the class's per-flow rate.
    active : ndarray of bool, optional
        Classes taking part; the others are ignored (rate ``nan``). Default: all.

    Returns
    -------
    ndarray of float
        Per-flow rate of each class, bytes/s; ``inf`` for an active class that crosses no link.
    """
    n_classes = multiplicity.size
    live = np.ones(n_classes, dtype=bool) if active is None else active.copy()
    rate = np.where(live, np.inf, np.nan)
    entries = live[class_of] & (weight > 0)
    link_of, class_of = link_of[entries], class_of[entries]
    demand = weight[entries] * multiplicity[class_of]
    unfrozen = np.zeros(n_classes, dtype=bool)
    unfrozen[class_of] = True
    remaining = capacity_Bps.astype(np.float64).copy()
    level = 0.0
    while unfrozen.any():
        level, frozen = _fill_round(link_of, class_of, demand, remaining, unfrozen, level)
        rate[frozen] = level
        unfrozen &= ~frozen
    return rate


def _fill_round(link_of: IntArray, class_of: IntArray, demand: FloatArray, remaining: FloatArray,
                unfrozen: NDArray[np.bool_], level: float) -> tuple[float, NDArray[np.bool_]]:
    """Raise the unfrozen classes to the next saturation; returns (new level, classes frozen).

    ``remaining`` (capacity left per link) is updated in place.
    """
    rising = unfrozen[class_of]
    load = np.bincount(link_of[rising], weights=demand[rising], minlength=remaining.size)
    loaded = load > 0
    share = np.full(remaining.size, np.inf)
    share[loaded] = np.maximum(remaining[loaded], 0.0) / load[loaded]
    step = float(share.min())
    remaining[loaded] -= step * load[loaded]
    tight = loaded & (share <= step * (1 + SATURATION_RTOL))
    remaining[tight] = 0.0
    frozen = np.zeros(unfrozen.size, dtype=bool)
    frozen[class_of[rising & tight[link_of]]] = True
    return level + step, frozen
