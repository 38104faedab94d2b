"""The step-time multiplier of a fail-slow episode, from the step engine (issue 25).

A straggler episode degrades one node (``reliability.straggler_degrades``): one GPU's compute,
every GPU of the node, the node's NICs or its NVLink, to a factor of nominal. How much that slows
the whole job's step is a property of the layout and the fabric, not a constant: a slow GPU paces
its TP group, its pipeline and, at the DP reduction, every replica; a NIC at half its bandwidth
costs only the exposed share of the traffic that crosses it. So the multiplier is the step engine's
time with the degradation on node 0 (:mod:`simcluster.run.perturb` and the DES's perturbations)
over the nominal step, computed once per scenario by the same engine as the nominal step. The
closed forms cannot degrade one node's NVLink; that case is priced by the DES.
"""

from __future__ import annotations

import dataclasses

from simcluster.run.single import engine_step
from simcluster.spec.scenario import GpuSlowdownSpec, LinkBandwidthSpec, Scenario


def straggler_scenario(s: Scenario) -> Scenario:
    """``s`` with one straggler episode's degradation (``reliability.straggler_degrades``) added
    on node 0 to its perturbations."""
    rel = s.reliability
    if rel is None:
        return s
    degrade, pert = rel.straggler_degrades, s.perturbations
    if degrade.what in ("gpu", "node"):
        slow = GpuSlowdownSpec(node=0, gpu=0 if degrade.what == "gpu" else None,
                               factor=degrade.factor)
        pert = dataclasses.replace(pert, gpu_slowdown=(*pert.gpu_slowdown, slow))
    else:
        link = LinkBandwidthSpec(layer=degrade.what, node=0, factor=degrade.factor)
        pert = dataclasses.replace(pert, link_bandwidth=(*pert.link_bandwidth, link))
    return dataclasses.replace(s, perturbations=pert)


def straggler_slowdown(s: Scenario, contention: str = "auto", engine: str = "analytical",
                       nominal_s: float | None = None) -> float:
    """Step time with one episode's degradation over the nominal step time (>= 1).

    ``engine`` and ``contention`` are those of the nominal step (``nominal_s``, computed when not
    given). The analytical engine cannot degrade one node's NVLink, so that kind runs the DES for
    both steps; one node's NICs need Tier B contention, so ``contention="off"`` becomes ``auto``.
    """
    what = s.reliability.straggler_degrades.what if s.reliability is not None else "gpu"
    use = "des" if engine == "analytical" and what == "scale_up" else engine
    mode = "auto" if use == "analytical" and what == "scale_out" and contention == "off" \
        else contention
    if nominal_s is None or (use, mode) != (engine, contention):
        nominal_s = engine_step(s, mode, use)[0].iteration_time_s
    slow_s = engine_step(straggler_scenario(s), mode, use)[0].iteration_time_s
    return max(1.0, slow_s / nominal_s)


def resolve_straggler(s: Scenario, contention: str = "auto", engine: str = "analytical",
                      nominal_s: float | None = None) -> Scenario:
    """``s`` with ``reliability.straggler_slowdown`` set to :func:`straggler_slowdown` where it is
    null and episodes happen (``stragglers_per_node_day`` > 0); otherwise ``s`` itself."""
    rel = s.reliability
    if rel is None or rel.straggler_slowdown is not None or rel.stragglers_per_node_day <= 0:
        return s
    factor = straggler_slowdown(s, contention, engine, nominal_s)
    return dataclasses.replace(s, reliability=dataclasses.replace(rel, straggler_slowdown=factor))
