"""simcluster: a discrete-event simulator of large-model training clusters.

The public API: :func:`load_scenario` reads a scenario file into a frozen, checked
:class:`~simcluster.spec.Scenario`; the rest of the package builds on it.
"""

from simcluster.errors import SimclusterError, SpecError
from simcluster.spec import Scenario, load_scenario, load_topology

__all__ = ["Scenario", "SimclusterError", "SpecError", "load_scenario", "load_topology"]
__version__ = "0.1.0"
