"""The analytical pass: memory first, then the closed-form step, one row per candidate layout.

A work chunk is a few ``(setting, split)`` points; the worker rebuilds the setting's base scenario
(cached per process), walks the split's layouts (:func:`.space.split_layouts`) and writes a row
for every candidate: ``status`` ``ok`` (timed), ``memory`` (does not fit: not timed) or ``rule``
(rejected by the loader's rules, with the key and message). The numbers of an ``ok`` row are those
of ``simcluster run --fast`` on the same scenario: the same ``estimate_memory``, the same
``run.single.engine_step`` and the same ``RunResult.to_dict``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcluster.errors import SpecError
from simcluster.perf.memory import MemoryEstimate, estimate_memory
from simcluster.perf.memory_overheads import WORST_ALLOCATOR_FRAGMENTATION
from simcluster.perf.offload import host_refusal
from simcluster.report.validation import validation_short
from simcluster.run.single import RunResult, engine_step
from simcluster.spec.scenario import ParallelismSpec, Scenario
from simcluster.sweep.base import load_base
from simcluster.sweep.runner import Chunk, Row
from simcluster.sweep.space import SearchAxes, layout_values, split_layouts
from simcluster.units import GiB

#: Scalar fields of a run's output copied into an ``ok`` row (``iteration_time_s`` as ``step_time_s``).
RUN_FIELDS = ("step_time_s", "tokens_per_s", "mfu", "model_tflops_per_gpu", "hfu",
              "bubble_fraction", "peak_memory_gib", "memory_capacity_gib", "time_to_train_days",
              "gpu_hours", "cost_usd", "cash_usd", "capital_usd", "network_usd", "energy_usd")
_BASES: dict[str, Scenario] = {}


@dataclass(frozen=True, slots=True)
class Setting:
    """One hardware option or combination of varied values: overrides and their output columns."""

    option: str
    overrides: tuple[str, ...]
    columns: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class AnalyticalTask:
    """Evaluates chunks of ``(setting index, split or None)`` points (``None``: the file's layout)."""

    source: str | dict[str, Any]
    overrides: tuple[str, ...]
    settings: tuple[Setting, ...]
    axes: SearchAxes
    search: bool = True
    headroom_gib: float | None = None  # None: the allocator's worst published fragmentation
    contention: str = "auto"

    def base(self, index: int) -> Scenario:
        """The base scenario of setting ``index`` (loaded once per process)."""
        items = (*self.overrides, *self.settings[index].overrides)
        key = json.dumps([_source_key(self.source), items, self.search], sort_keys=True)
        if key not in _BASES:
            _BASES[key] = load_base(self.source, items, self.search)
        return _BASES[key]

    def __call__(self, chunk: Chunk) -> list[Row]:
        rows: list[Row] = []
        for index, split in chunk.points:
            base = self.base(index)
            head = self._head(index, base)
            if split is None:
                rows.append({**head, **self.row(base, base.parallelism)})
                continue
            for item in split_layouts(base, dict(split), self.axes):
                if isinstance(item, ParallelismSpec):
                    rows.append({**head, **self.row(base, item)})
                else:
                    rows.append({**head, **_rule_row(*item)})
        return rows

    def _head(self, index: int, base: Scenario) -> Row:
        setting = self.settings[index]
        head: Row = {"setting": index, "option": setting.option}
        head.update(setting.columns)
        head.update({"gpus": base.cluster.gpus, "nodes": base.cluster.nodes,
                     "topology": base.cluster.topology.name})
        return head

    def row(self, base: Scenario, par: ParallelismSpec) -> Row:
        """The row of ``base`` with layout ``par``: memory, and when it fits the step."""
        s = dataclasses.replace(base, parallelism=par)
        memory = estimate_memory(s, flash_attention=s.execution.flash_attention)
        row: Row = {**layout_values(par), "status": "ok", "reason": "",
                    "peak_memory_gib": memory.peak_bytes / GiB,
                    "memory_capacity_gib": memory.capacity_bytes / GiB}
        reason = (host_refusal(memory.host_bytes, memory.host_capacity_bytes, s.cluster.topology)
                  or memory_refusal(memory, self.headroom_gib))
        if reason:
            row.update(status="memory", reason=reason)
            return row
        step, factors = engine_step(s, self.contention, "analytical")
        out = RunResult(s, step, memory, engine="analytical", contention=factors).to_dict()
        out["step_time_s"] = out["iteration_time_s"]
        row.update({k: out[k] for k in RUN_FIELDS if k in out})
        row.update({f"{k}_s": v for k, v in out["time_breakdown_s"].items()})
        row["validation"] = validation_short(out["validation"])
        return row


def memory_refusal(memory: MemoryEstimate, headroom_gib: float | None) -> str:
    """Why a layout does not fit, or ``""`` when it does (docs/sweep.md, "Memory headroom").

    ``headroom_gib`` GiB are kept free on every GPU; ``None`` (the default, ``auto``) instead
    requires the layout to fit with the caching allocator at the worst fragmentation GMLake
    measured over eight LLM training runs (33%, arXiv 2401.08156) rather than the memory model's
    average (15%): the reserve grows only on what is allocated and freed every micro-batch.
    """
    capacity, peak = memory.capacity_bytes, memory.peak_bytes
    if headroom_gib is not None:
        limit = capacity - headroom_gib * GiB
        if peak <= limit:
            return ""
        room = f" after {headroom_gib:g} GiB headroom" if headroom_gib else ""
        return f"needs {peak / GiB:.1f} GiB per GPU, {limit / GiB:.1f} GiB available{room}"
    worst = memory.peak_at_fragmentation(WORST_ALLOCATOR_FRAGMENTATION)
    if worst <= capacity:
        return ""
    return (f"needs {peak / GiB:.1f} GiB per GPU, {worst / GiB:.1f} GiB with the allocator at "
            f"{WORST_ALLOCATOR_FRAGMENTATION:.0%} fragmentation (headroom auto), "
            f"{capacity / GiB:.1f} GiB available")


def _rule_row(values: dict[str, Any], err: SpecError) -> Row:
    row: Row = {k: v for k, v in values.items() if k != "stage_layers"}
    layers = values.get("stage_layers")
    row["stage_layers"] = ",".join(map(str, layers)) if layers else ""
    row.update(status="rule", reason=f"{err.key}: {err.message}")
    return row


def _source_key(source: str | Path | Mapping[str, Any]) -> Any:
    return source if isinstance(source, Mapping) else str(source)
