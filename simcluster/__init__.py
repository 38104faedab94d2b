"""simcluster: a discrete-event simulator of large-model training clusters.

The public API: :func:`load_scenario` reads a scenario file into a frozen, checked
:class:`~simcluster.spec.Scenario`; the rest of the package builds on it.

The names are exported lazily (PEP 562 module ``__getattr__``): ``import simcluster`` and the
command line's ``--help`` and ``--version`` import neither the spec loader nor numpy or networkx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcluster.lazy import lazy_exports

if TYPE_CHECKING:
    from simcluster.errors import SimclusterError, SpecError
    from simcluster.spec import Scenario, load_scenario, load_topology
    from simcluster.sweep import sweep

__all__ = ["Scenario", "SimclusterError", "SpecError", "load_scenario", "load_topology", "sweep"]
__version__ = "0.1.0"

#: Exported name -> the module that defines it (imported on first access).
_EXPORTS = {
    "Scenario": "simcluster.spec",
    "SimclusterError": "simcluster.errors",
    "SpecError": "simcluster.errors",
    "load_scenario": "simcluster.spec",
    "load_topology": "simcluster.spec",
}


def __getattr__(name: str) -> object:
    """``simcluster.sweep``: the callable sweep package (its own module, callable); the rest lazily."""
    if name == "sweep":
        import importlib

        return importlib.import_module("simcluster.sweep")
    return _lazy_getattr(name)


_lazy_getattr, __dir__ = lazy_exports("simcluster", globals(), {**_EXPORTS, "sweep": ""})
