"""DES cost bounded in the number of micro-batches: simulate a few short steps, extrapolate exactly.

A pipeline schedule reaches a periodic steady state: past the fill, every ``q`` more micro-batches
(``q = pp``, the period of every schedule here, interleaved's groups of ``pp`` micro-batches
included) add the same ops, waits and transfers in the same pattern, so the step time, every
breakdown category, the DP totals and the record counts grow by the same increment. The engine
simulates the step with ``m0``, ``m0 + q``, ``m0 + 2q`` and ``m0 + 3q`` micro-batches (``m0`` the
same residue modulo ``q`` as the wanted ``m``) and, when the three successive increments of every
quantity agree (to :data:`PERIOD_RTOL` relative, record counts exactly) and the critical stage is
the same, returns the last one advanced by ``(m - m0 - 3q) / q`` increments. Otherwise it retries
from a larger ``m0`` (a longer transient) within :data:`SAMPLE_OPS` simulated ops; then the caller
falls back to the full simulation up to :data:`FULL_LIMIT_OPS` ops, or refuses (:func:`refuse`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from itertools import pairwise

from simcluster.errors import SpecError
from simcluster.perf.step import TimeBreakdown
from simcluster.sim.durations import degraded
from simcluster.sim.perturb import Perturbations, replica_classes, uniform_link_factors
from simcluster.sim.result import DesResult, Extrapolation
from simcluster.spec.scenario import Scenario

#: Above this many ops in the plan the engine extrapolates from a periodic steady state.
EXTRAPOLATE_ABOVE_OPS = 2**16
#: The full simulation's bound (~2.2 records per op): beyond it a step that is not periodic is
#: refused with a :class:`SpecError`.
FULL_LIMIT_OPS = 2**19
#: Ops simulated at most while looking for the steady state (all samples together).
SAMPLE_OPS = 2**16
#: Successive increments agreeing to this relative tolerance count as one period's increment
#: (1e-12 until the ops ran on for the SMs of the collectives beside them, sim/commclock.py: those
#: extensions add a few ulps per op, 2e-12 over a GPT-3 step's samples).
PERIOD_RTOL = 1e-10


def op_count(s: Scenario, pert: Perturbations) -> int:
    """Ops of the plan of ``s`` (replica classes x stages x chunks x micro-batches x op kinds),
    without building it."""
    par = s.parallelism
    classes = replica_classes(degraded(s, *uniform_link_factors(pert)), pert)
    kinds = 3 if par.schedule == "zb-h1" else 2
    return len(classes) * par.pp * par.virtual_stages * par.micro_batches * kinds


def with_micro_batches(s: Scenario, m: int) -> Scenario:
    """``s`` with ``m`` micro-batches per pipeline (global batch changed to match)."""
    par = s.parallelism
    par = dataclasses.replace(par, global_batch=m * par.micro_batch * par.dp)
    return dataclasses.replace(s, parallelism=par)


def _vector(r: DesResult) -> tuple[float, ...]:
    """The extrapolated times: breakdown categories, DP total and DP hidden."""
    return (*r.breakdown.as_dict().values(), r.dp_total_s, r.dp_hidden_s)


def _counts(results: list[DesResult], ahead: int, repeats: int) -> tuple[int, int, bool]:
    """(records, critical-path records, exact) ``repeats`` periods after the last sample.

    ``results``: four samples one period apart, then one ``ahead`` periods after the fourth. A
    wait is recorded only when it lasts longer than zero, so a wait that is zero up to rounding can
    come and go from one period to the next: the counts are exact when the samples grow by one
    increment, else advanced by the mean increment over the samples (``exact`` False).
    """
    out = []
    exact = True
    for count in ([r.record_count for r in results], [len(r.critical_path) for r in results]):
        steps = {b - a for a, b in pairwise(count[:4])}
        mean = (count[4] - count[0]) / (3 + ahead)
        exact = exact and len(steps) == 1 and count[4] == count[3] + ahead * steps.pop()
        out.append(count[4] + round(repeats * mean))
    return out[0], out[1], exact


def _periodic(values: list[tuple[float, ...]]) -> tuple[float, ...] | None:
    """The common increment of successive samples, or None when they do not agree."""
    steps = [tuple(b - a for a, b in zip(x, y, strict=True))
             for x, y in pairwise(values)]
    scale = [max(abs(v[k]) for v in values) for k in range(len(values[0]))]
    for d1, d2 in pairwise(steps):
        if any(abs(a - b) > PERIOD_RTOL * sc for a, b, sc in zip(d1, d2, scale, strict=True)):
            return None
    return steps[-1]


Simulate = Callable[[Scenario], DesResult]


def samples(s: Scenario) -> list[int]:
    """The first sample sizes ``m0`` to try (each retry doubles the transient), all with the
    residue of the wanted ``m`` modulo the period and leaving room for the check sample."""
    par = s.parallelism
    q, m = par.pp, par.micro_batches
    rest, k = m % q, 2
    out = []
    while rest + 2 * (k + 3) * q < m:
        out.append(rest + k * q)
        k *= 2
    return out


def extrapolate(s: Scenario, pert: Perturbations, simulate: Simulate) -> DesResult | None:
    """The step of ``s`` extrapolated from its periodic steady state, or None when none is found
    within :data:`SAMPLE_OPS` simulated ops. ``simulate`` runs the full engine on a scenario.

    Four samples ``m0 + kq`` must grow by equal increments with the same critical stage, and a
    fifth, about twice as long, must match their prediction (a transient that is still consuming
    slack grows linearly for a while, then stops).
    """
    q, m = s.parallelism.pp, s.parallelism.micro_batches
    spent = 0
    for m0 in samples(s):
        sizes = [m0 + k * q for k in range(4)]
        sizes.append(m0 % q + 2 * (sizes[3] - m0 % q))
        spent += sum(op_count(with_micro_batches(s, n), pert) for n in sizes)
        if spent > SAMPLE_OPS:
            return None
        results = [simulate(with_micro_batches(s, n)) for n in sizes]
        values = [_vector(r) for r in results]
        step = _periodic(values[:4])
        if step is None or len({(r.critical_group, r.critical_stage) for r in results}) != 1:
            continue
        ahead = (sizes[4] - sizes[3]) // q
        if not _close(_ahead(values[3], step, ahead), values[4]):
            continue
        repeats = (m - sizes[-1]) // q
        records, path, exact = _counts(results, ahead, repeats)
        return _advanced(results[-1], _ahead(values[-1], step, repeats), Extrapolation(
            micro_batches=m, simulated_micro_batches=sizes[-1], period=q, repeats=repeats,
            records=records, critical_path_records=path, counts_exact=exact))
    return None


def _close(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Equal to :data:`PERIOD_RTOL` relative, quantity by quantity."""
    return all(abs(x - y) <= PERIOD_RTOL * max(abs(x), abs(y)) for x, y in zip(a, b, strict=True))


def _ahead(values: tuple[float, ...], step: tuple[float, ...], repeats: int) -> tuple[float, ...]:
    """``values`` advanced by ``repeats`` periods."""
    return tuple(v + repeats * d for v, d in zip(values, step, strict=True))


def _advanced(last: DesResult, total: tuple[float, ...], how: Extrapolation) -> DesResult:
    """``last`` with the extrapolated breakdown, DP totals and counts."""
    categories = list(last.breakdown.as_dict())
    breakdown = TimeBreakdown(**dict(zip(categories, total, strict=False)))
    n = len(categories)
    return dataclasses.replace(last, iteration_time_s=breakdown.total_s, breakdown=breakdown,
                               dp_total_s=total[n], dp_hidden_s=total[n + 1], extrapolation=how)


def refuse(s: Scenario, ops: int) -> SpecError:
    """The error for a step too long to simulate in full that did not reach a steady state."""
    par = s.parallelism
    return SpecError(
        "parallelism.global_batch",
        f"{par.global_batch} gives {par.micro_batches} micro-batches per pipeline "
        f"(global_batch / (micro_batch x dp)), {ops} simulated ops; this step did not reach a "
        f"periodic steady state to extrapolate from, and the discrete-event engine simulates at "
        f"most {FULL_LIMIT_OPS} ops in full: lower parallelism.global_batch, raise "
        f"parallelism.micro_batch, or use --fast")
