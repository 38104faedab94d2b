"""A whole sweep: settings -> splits -> analytical pass -> ranking -> DES re-rank -> goodput.

:func:`run_sweep` is the engine behind ``simcluster sweep`` and :func:`simcluster.sweep`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simcluster.errors import InvariantError, SpecError
from simcluster.report.validation import validation_text
from simcluster.run.validation import block_for, gemm_basis, setting
from simcluster.sweep.config import Plan
from simcluster.sweep.evaluate import AnalyticalTask
from simcluster.sweep.progress import Progress
from simcluster.sweep.rank import eligible, pareto_front, rank
from simcluster.sweep.rerank import INTERVAL_KEY, DesTask, GoodputTask, layout_of
from simcluster.sweep.runner import Chunk, ChunkTask, Row, run_chunks
from simcluster.sweep.space import LAYOUT_KEYS, Rejections, count_layouts, splits
from simcluster.sweep.store import ResultStore

#: Candidate layouts per work chunk of the analytical pass (a chunk is whole splits).
CHUNK_LAYOUTS = 4096
#: Most candidate layouts one sweep takes, as counted before the rules run (an upper bound: the
#: planning scenario counts 1.47 M here and has 565 k candidates after the variant rules). Rows stay
#: in memory until the tables are written (the planning sweep peaks at 1.6 GiB), so a sweep at this
#: bound needs about 3 to 4 GiB.
MAX_CANDIDATES = 2_500_000
FORMAT_VERSION = 1
#: Columns that identify a configuration apart from its varied keys.
_CONFIG_KEYS = frozenset(LAYOUT_KEYS) | {"option", "topology", "nodes", "gpus"}


@dataclass(frozen=True, slots=True)
class Execution:
    """Where and how the passes run (none of it changes a number)."""

    jobs: int | None = 1  # None: every CPU this process may use
    backend: str = "local"
    ray_address: str | None = None
    out: Path | None = None
    progress: bool = False
    replicas: int = 100
    results: str = "parquet"  # or csv / csv.gz: also write the CSV (store.RESULT_FORMATS)


@dataclass(slots=True)
class SweepOutcome:
    """Every row, the ranking, the Pareto front and the rejection counts of a sweep."""

    plan: Plan
    rows: list[Row]
    ranked: list[int]
    pareto: list[int]
    rejections: Rejections
    files: tuple[Path, ...] = ()
    pareto_axes: tuple[str, str] = ("step_time_s", "gpus")
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    validation: dict[tuple[str, bool], str] = field(default_factory=dict)


def run_sweep(task: AnalyticalTask, plan: Plan, execution: Execution, identity: str
              ) -> SweepOutcome:
    """Run ``plan`` (its settings are ``task.settings``); ``identity`` keys the result store."""
    start = time.perf_counter()
    rejections = Rejections()
    chunks = _chunks(task, plan, rejections)
    store = (ResultStore(execution.out, _key(identity)) if execution.out is not None else None)
    rows = _run(task, chunks, execution, store, "analytical pass")
    indexes = eligible(rows, plan.constraints, rejections)
    ranked = rank(rows, indexes, timing_objective(plan.objective))
    outcome = SweepOutcome(plan, rows, ranked, [], rejections)
    outcome.timings_s["analytical"] = time.perf_counter() - start
    for name, wanted, run_pass in (("des", plan.rerank, _des_pass),
                                   ("reliability", plan.goodput, _goodput_pass)):
        if wanted and outcome.ranked:
            start = time.perf_counter()
            run_pass(task, outcome, execution)
            outcome.timings_s[name] = time.perf_counter() - start
    outcome.validation = validation_lines(task, rows, outcome.ranked)
    outcome.pareto_axes = pareto_axes(rows, outcome.ranked)
    outcome.pareto = _pareto(rows, outcome.ranked, outcome.pareto_axes)
    if store is not None:
        outcome.files = store.finish(_with_ranks(outcome), execution.results)
    return outcome


def validation_lines(task: AnalyticalTask, rows: list[Row], ranked: list[int]
                     ) -> dict[tuple[str, bool], str]:
    """(option, parameters sharded) -> the validation line, for every pair among the eligible
    rows (a few: the options times ZeRO-3 or not)."""
    out: dict[tuple[str, bool], str] = {}
    for i in ranked:
        row = rows[i]
        pair = (str(row.get("option") or ""), row.get("zero_stage") == 3)
        if pair not in out:
            base = task.base(int(str(row["setting"])))
            key = {**setting(base), "sharding": "zero3" if pair[1] else "replicated"}
            gemm = gemm_basis(base.cluster.topology.accelerator, base.precision)
            out[pair] = validation_text(block_for(key, gemm))
    return out


def _with_ranks(outcome: SweepOutcome) -> list[Row]:
    """The rows given their ``rank`` (None when not eligible) and ``pareto`` columns, in place."""
    ranks = {i: n + 1 for n, i in enumerate(outcome.ranked)}
    front = set(outcome.pareto)
    for i, row in enumerate(outcome.rows):
        row["rank"] = ranks.get(i)
        row["pareto"] = i in front
    return outcome.rows


def _key(identity: str) -> str:
    return hashlib.sha256(f"{FORMAT_VERSION}\n{identity}".encode()).hexdigest()[:32]


def identity_of(source: str | Path | Mapping[str, Any], overrides: Sequence[str], plan: Plan,
                extra: Mapping[str, Any]) -> str:
    """What makes two sweeps the same: the file's bytes, the overrides and the plan, less what only
    ranks or re-times the stored rows (``top``, ``objective``, ``rerank``, ``goodput``): a
    finished sweep takes ``--rerank`` or ``--goodput`` later in place, from its stored rows."""
    plan = dataclasses.replace(plan, top=10, objective="step_time_s", rerank=0, goodput=0)
    if isinstance(source, Mapping):
        text = json.dumps(source, sort_keys=True, default=str)
    else:
        text = Path(source).read_text(encoding="utf-8", errors="replace")
    from simcluster import __version__

    return json.dumps([__version__, CHUNK_LAYOUTS, text, list(overrides), repr(plan), dict(extra)],
                      sort_keys=True, default=str)


def _chunks(task: AnalyticalTask, plan: Plan, rejections: Rejections) -> list[Chunk]:
    chunks: list[Chunk] = []
    points: list[Any] = []
    size = total = 0
    for index in range(len(task.settings)):
        base = task.base(index)
        limit = plan.constraints.max_gpus
        if limit is not None and base.cluster.gpus > limit:
            rejections.add("setting", "constraint.max_gpus", f"{base.cluster.gpus} GPUs")
            continue
        if not task.search:
            items: list[tuple[Any, int]] = [(None, 1)]
        else:
            items = [(tuple(s.items()), count_layouts(base, s, task.axes))
                     for s in splits(base, task.axes, rejections)]
        for split, count in items:
            points.append((index, split))
            size += count
            total += count
            if size >= CHUNK_LAYOUTS:
                chunks.append(Chunk(len(chunks), tuple(points)))
                points, size = [], 0
    if points:
        chunks.append(Chunk(len(chunks), tuple(points)))
    if total > MAX_CANDIDATES:
        raise SpecError("--search", f"up to {total:,} candidate layouts; a sweep takes at most "
                        f"{MAX_CANDIDATES:,}: restrict layout axes (--search tp=4,8 --search "
                        "micro_batch=1,2), the settings (--max-gpus, fewer --vary values) or "
                        "split the sweep")
    return chunks


def _run(task: ChunkTask, chunks: list[Chunk], execution: Execution, store: ResultStore | None,
         label: str) -> list[Row]:
    total = sum(len(c.points) for c in chunks)
    progress = Progress(total, label=label) if execution.progress else None
    jobs = max(1, min(execution.jobs or usable_cpus(), len(chunks)))
    if execution.backend == "ray" and execution.jobs is not None:
        jobs = execution.jobs  # on a Ray cluster -j is the number of chunks in flight
    try:
        return run_chunks(task, chunks, jobs=jobs, backend=execution.backend,
                          ray_address=execution.ray_address, store=store, progress=progress)
    finally:
        if progress is not None:
            progress.close()


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one), at most 256."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        count = os.cpu_count() or 1
    return min(count, 256)


def _merge(outcome: SweepOutcome, updates: list[Row], prefix_old: Callable[[Row], Row]) -> None:
    for update in updates:
        index = int(update.pop("row"))  # type: ignore[arg-type]
        row = outcome.rows[index]
        row.update(prefix_old(row))
        row.update(update)


def _des_pass(task: AnalyticalTask, outcome: SweepOutcome, execution: Execution) -> None:
    best = outcome.ranked[:outcome.plan.rerank]
    chunks = [Chunk(n, ((i, _setting(outcome.rows[i]), tuple(layout_of(
        outcome.rows[i]).items())),)) for n, i in enumerate(best)]
    updates = _run(DesTask(task), chunks, execution, None, "DES re-rank")
    _merge(outcome, updates, lambda row: {"analytical_step_time_s": row.get("step_time_s")})
    head = rank(outcome.rows, best, timing_objective(outcome.plan.objective))
    outcome.ranked = head + outcome.ranked[len(best):]
    outcome.notes.append(f"the best {len(best)} by the analytical model were re-timed with the "
                         "DES and re-ranked; the rest keep their analytical ranks")


def timing_objective(objective: str) -> str:
    """The objective of the passes before the reliability engine: time to train stands for the
    goodput-adjusted time to train until that is known."""
    return "time_to_train_days" if objective == "goodput_time_to_train_days" else objective


def interval_siblings(rows: list[Row], ranked: list[int], count: int) -> list[int]:
    """The best ``count`` configurations, each with every checkpoint interval the sweep varies.

    Rows that differ only in ``checkpoint.interval_min`` share their step (same layout, same
    hardware), so they rank together; the reliability pass must see all of them to compare the
    intervals on the same sample paths.
    """
    def config(i: int) -> tuple[Any, ...]:
        return tuple(sorted((k, repr(v)) for k, v in rows[i].items()
                            if k in _CONFIG_KEYS or ("." in k and k != INTERVAL_KEY)))

    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in ranked:
        groups.setdefault(config(i), []).append(i)
    chosen = list(groups.values())[:count]
    return [i for group in chosen for i in group]


def _goodput_pass(task: AnalyticalTask, outcome: SweepOutcome, execution: Execution) -> None:
    best = interval_siblings(outcome.rows, outcome.ranked, outcome.plan.goodput)
    chunks = [Chunk(n, ((i, _setting(outcome.rows[i]), tuple(layout_of(
        outcome.rows[i]).items()), float(outcome.rows[i]["step_time_s"] or 0.0)),))
        for n, i in enumerate(best)]
    goodput = GoodputTask(task, execution.replicas)
    updates = _run(goodput, chunks, execution, None, "reliability")
    _merge(outcome, updates, lambda row: {})
    if outcome.plan.objective == "goodput_time_to_train_days":
        chosen = set(best)
        rest = [i for i in outcome.ranked if i not in chosen]
        outcome.ranked = rank(outcome.rows, best, outcome.plan.objective) + rest


def _setting(row: Row) -> int:
    index = row.get("setting")
    if not isinstance(index, int):
        raise InvariantError(f"a sweep row without its setting index: {row!r}")
    return index


def pareto_axes(rows: list[Row], ranked: list[int]) -> tuple[str, str]:
    """Time to train against cost where every eligible row has both; else the step time, and the
    GPU count standing for the cost."""
    def have(key: str) -> bool:
        return bool(ranked) and all(isinstance(rows[i].get(key), int | float) for i in ranked)

    time_key = "time_to_train_days" if have("time_to_train_days") else "step_time_s"
    return time_key, "cost_usd" if have("cost_usd") else "gpus"


def _pareto(rows: list[Row], ranked: list[int], axes: tuple[str, str]) -> list[int]:
    """The Pareto front of the eligible rows on ``axes`` (both minimised)."""
    points = [(_num(rows[i][axes[0]]), _num(rows[i][axes[1]])) for i in ranked]
    return [ranked[j] for j in pareto_front(points)]


def _num(value: object) -> float:
    if isinstance(value, int | float):
        return float(value)
    raise InvariantError(f"a Pareto coordinate is not a number: {value!r}")
