"""The later passes on the best few: the discrete-event engine, then the reliability engine.

``DesTask`` times a layout with the DES (``simcluster run``'s default engine, the same
``run.single.engine_step``) and gives the row's new metrics; the analytical step is kept as
``analytical_step_time_s``. ``GoodputTask`` runs the reliability engine on a layout at its DES (or
analytical) step time: at the setting's own checkpoint interval when the sweep varies
``checkpoint.interval_min`` (every interval on the same sample paths: the horizon engine draws
its failures from the scenario's seed, so the comparison uses common random numbers), else at the
interval the golden-section optimiser finds (``horizon.optimize_interval``, the same common random
numbers). Both are chunk tasks of :mod:`.runner`, so they run on ``-j N`` processes or Ray.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from simcluster.errors import SpecError
from simcluster.perf.memory import estimate_memory
from simcluster.run.single import RunResult, engine_step
from simcluster.spec.scenario import CheckpointSpec, ParallelismSpec, Scenario
from simcluster.sweep.evaluate import RUN_FIELDS, AnalyticalTask
from simcluster.sweep.runner import Chunk, Row
from simcluster.sweep.space import LAYOUT_KEYS

INTERVAL_KEY = "checkpoint.interval_min"
#: Layout keys added after the first stored sweeps: a row without them takes their default.
_LATER = ("offload", "expert_tp")


def layout_of(row: Row) -> dict[str, Any]:
    """The ``ParallelismSpec`` fields of a result row (``stage_layers`` back to a tuple; a row
    stored before ``offload`` or ``expert_tp`` were layout keys keeps its optimizer on the GPU
    and its experts at TP's split)."""
    values: dict[str, Any] = {k: row[k] for k in LAYOUT_KEYS if k not in _LATER}
    values["offload"] = row.get("offload") or "none"
    etp = row.get("expert_tp")
    values["expert_tp"] = None if etp in (None, "") else int(str(etp))
    text = str(values.pop("stage_layers") or "")
    values["stage_layers"] = tuple(int(x) for x in text.split(",")) if text else None
    return values


def _scenario(task: AnalyticalTask, index: int, layout: dict[str, Any]) -> Scenario:
    base = task.base(index)
    par = ParallelismSpec(**{**{f: getattr(base.parallelism, f)
                                for f in ParallelismSpec.__dataclass_fields__}, **layout})
    return dataclasses.replace(base, parallelism=par)


@dataclass(frozen=True, slots=True)
class DesTask:
    """Points ``(row index, setting index, layout)`` -> ``{"row": i, ...DES metrics}``."""

    analytical: AnalyticalTask

    def __call__(self, chunk: Chunk) -> list[Row]:
        out: list[Row] = []
        for row_index, index, layout in chunk.points:
            s = _scenario(self.analytical, index, dict(layout))
            memory = estimate_memory(s, flash_attention=s.execution.flash_attention)
            step, factors = engine_step(s, self.analytical.contention, "des")
            d = RunResult(s, step, memory, engine="des", contention=factors).to_dict()
            d["step_time_s"] = d["iteration_time_s"]
            row: Row = {"row": row_index, "engine": "des"}
            row.update({k: d[k] for k in RUN_FIELDS if k in d})
            row.update({f"{k}_s": v for k, v in d["time_breakdown_s"].items()})
            out.append(row)
        return out


@dataclass(frozen=True, slots=True)
class GoodputTask:
    """Points ``(row index, setting index, layout, step_time_s)`` -> goodput columns."""

    analytical: AnalyticalTask
    replicas: int = 100

    def __call__(self, chunk: Chunk) -> list[Row]:
        return [self._one(*point) for point in chunk.points]

    def _one(self, row_index: int, index: int, layout: tuple[tuple[str, Any], ...],
             step_s: float) -> Row:
        from simcluster.horizon import simulate_reliability
        from simcluster.horizon.optimize import optimize_interval
        from simcluster.run.straggler import resolve_straggler

        s = _scenario(self.analytical, index, dict(layout))
        if s.reliability is None or s.training.tokens is None:
            raise SpecError("sweep.goodput", "needs the scenario's reliability section and "
                            "training.tokens (the reliability engine simulates the whole run)")
        s = resolve_straggler(s)  # the closed forms price the episode (nominal and degraded)
        fixed = dict(self.analytical.settings[index].columns).get(INTERVAL_KEY)
        if fixed is None:
            best = optimize_interval(s, self.replicas, step_time_s=step_s)
            s = _with_interval(s, best.optimal_interval_min)
        result = simulate_reliability(s, self.replicas, step_time_s=step_s).to_dict()
        ttt = result["time_to_train_days"]
        interval = s.checkpoint.interval_s / 60.0 if s.checkpoint is not None else None
        return {"row": row_index, "goodput": result["goodput"],
                "checkpoint_interval_min": interval,
                "goodput_time_to_train_days": None if ttt is None else ttt["mean"]}


def _with_interval(s: Scenario, minutes: float) -> Scenario:
    ckpt = s.checkpoint if s.checkpoint is not None else CheckpointSpec()
    return dataclasses.replace(s, checkpoint=dataclasses.replace(ckpt, interval_s=minutes * 60.0))
