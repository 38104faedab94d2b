"""A cheap structural pre-check of a parallel layout against an already loaded scenario.

A sweep enumerates many layouts of one scenario; :func:`check_layout` tells, in microseconds, whether
``load_scenario(file, ["parallelism.KEY=VALUE", ...])`` would accept one, without reading YAML or
re-parsing the model and cluster. It runs the loader's own rules, in the loader's order: the field
conversion and bounds of :func:`.schema.convert_fields`, :meth:`ParallelismSpec.derive` (``dp``),
the checks of ``ParallelismSpec`` itself and :func:`.checks.check_parallelism`. No rule is copied.
"""

from __future__ import annotations

from typing import Any

from simcluster.errors import SpecError
from simcluster.spec import schema
from simcluster.spec.checks import check_parallelism
from simcluster.spec.scenario import ParallelismSpec, Scenario

_PATH = "parallelism"
#: Fields taken from the base scenario when not overridden (``dp`` is derived again, as on load).
_KEPT = tuple(name for name in ParallelismSpec.__dataclass_fields__ if name != "dp")


def check_layout(base: Scenario, **overrides: object) -> None:
    """Raise :class:`SpecError` iff ``base`` with these ``parallelism`` values would not load.

    Parameters
    ----------
    base : Scenario
        A loaded scenario; its model, cluster and other ``parallelism`` values are kept.
    **overrides
        ``parallelism`` keys and their YAML values (``tp=4, pp=2``), as ``--set
        parallelism.tp=4`` would give them. ``dp`` is derived from the GPU count unless given.

    Raises
    ------
    SpecError
        The error the loader raises for the same overrides, same key path (no file named). A base
        file that states ``dp`` explicitly is the exception: the loader keeps that ``dp``.
    """
    values = schema.convert_fields(ParallelismSpec, overrides, _PATH)
    build_layout(base, values)


def build_layout(base: Scenario, values: dict[str, Any]) -> ParallelismSpec:
    """The ``ParallelismSpec`` of ``base`` with ``values`` (already typed field values), checked.

    :func:`check_layout` without the YAML conversion: the values must be of the fields' Python
    types (``stage_layers`` a tuple). ``dp`` is re-derived unless given; the same rules run
    (:meth:`ParallelismSpec.derive`, the spec's own checks, :func:`.checks.check_parallelism`) and
    the same :class:`SpecError` is raised. A sweep builds its layouts with it.
    """
    par = base.parallelism
    merged = {name: getattr(par, name) for name in _KEPT}
    merged.update(values)
    try:
        ParallelismSpec.derive(merged, {"model": base.model, "cluster": base.cluster})
        layout = ParallelismSpec(**merged)
    except SpecError as err:
        raise err.within("", _PATH) from None
    check_parallelism(layout, base.model, base.cluster.topology)
    return layout
