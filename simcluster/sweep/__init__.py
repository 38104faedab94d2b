"""Sweeps: every valid layout, hardware option and checkpoint interval of a scenario, ranked.

``simcluster sweep`` on the command line; in Python ``simcluster.sweep(path, ...)`` (this package
is callable: it forwards to :func:`simcluster.sweep.api.sweep`) returns a pandas DataFrame of the
eligible layouts, best first. The package sits between ``cli`` and ``run`` in the import layers:
it drives the analytical step, the DES re-rank and the reliability engine.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["sweep"]


def sweep(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """:func:`simcluster.sweep.api.sweep` (imported on first call: pandas loads then)."""
    from simcluster.sweep.api import sweep as run

    return run(*args, **kwargs)


class _CallableModule(types.ModuleType):
    """``simcluster.sweep(...)`` calls :func:`sweep`: the package and the function share a name."""

    def __call__(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
