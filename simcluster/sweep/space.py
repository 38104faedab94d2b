"""The layout space of a scenario: every valid parallel layout of its model on its GPUs.

The enumeration walks a tree: a split ``(tp, pp, cp, ep, expert_tp)`` (``dp`` follows from the
GPU count),
then the schedule variant (schedule, virtual stages, stage layers), ZeRO stage, offload and
sequence parallelism, then micro-batch and recompute. Every rule is the loader's own
(:func:`simcluster.spec.layout.build_layout`): a split is checked once with the least demanding
completion (micro-batch 1, 1F1B, ZeRO-0, no sequence parallelism), and every schedule variant
once at micro-batch 1. Micro-batch and recompute then vary freely: the loader's rules read them
only through ``global_batch % (micro_batch*dp)``, which the candidates satisfy by construction
(``micro_batch`` runs over the divisors of ``global_batch/dp``). The brute-force tests check that
this walk yields exactly the layouts ``load_scenario`` accepts.

The space is finite by two stated conventions (docs/sweep.md):

- stages hold whole layers, at least one each (``pp*virtual_stages <= layers``); where
  ``pp*virtual_stages`` does not divide the layers, the split is the balanced one with the lighter
  chunks first and last (they also hold the embedding and the logits: Llama 3's 405B recipe,
  Dubey et al. 2024 s3.3.2), one ``stage_layers`` per shape rather than every composition;
- interleaving uses at most ``max_virtual_stages`` chunks per stage (default 8);
- ``offload`` (ZeRO-Offload, :mod:`simcluster.perf.offload`) is searched only where the search
  names it (``--search offload=none,optimizer``): by default every layout keeps its optimizer on
  the GPU, so the space is not tripled for every scenario.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from simcluster.errors import SpecError
from simcluster.spec.checks import scale_up_domain
from simcluster.spec.layout import build_layout
from simcluster.spec.scenario import OFFLOADS, RECOMPUTE, SCHEDULES, ParallelismSpec, Scenario

#: The layout keys a sweep sets, in output column order.
LAYOUT_KEYS = ("tp", "pp", "cp", "dp", "ep", "micro_batch", "schedule", "virtual_stages",
               "stage_layers", "recompute", "sequence_parallel", "zero_stage", "tp_across_nodes",
               "offload", "expert_tp")
#: Axes a user may restrict (``--search KEY=V1,V2``); ``dp`` and ``tp_across_nodes`` follow.
AXES = ("tp", "pp", "cp", "ep", "micro_batch", "schedule", "virtual_stages", "recompute",
        "sequence_parallel", "zero_stage", "offload", "expert_tp")
#: Axes searched over these values unless the search names them (docstring: ``offload``).
DEFAULT_AXIS_VALUES: dict[str, tuple[Any, ...]] = {"offload": ("none",)}
DEFAULT_MAX_VIRTUAL_STAGES = 8
#: Most GPUs a layout search takes (2**21, 2 M: eight times the largest clusters built); the
#: enumeration walks the divisors of the GPU count, so a bound keeps it instant.
MAX_SEARCH_GPUS = 2**21


def check_search_gpus(gpus: int, key: str = "cluster.nodes") -> None:
    """Refuse a layout search over more than :data:`MAX_SEARCH_GPUS` GPUs."""
    if gpus > MAX_SEARCH_GPUS:
        raise SpecError(key, f"{gpus:,} GPUs; a layout search takes at most {MAX_SEARCH_GPUS:,} "
                        "(use --layouts fixed to time the file's layout alone)")


@dataclass(frozen=True, slots=True)
class SearchAxes:
    """Which values each layout axis may take; ``None`` means every candidate."""

    values: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    max_virtual_stages: int = DEFAULT_MAX_VIRTUAL_STAGES

    def allows(self, axis: str, value: object) -> bool:
        """Whether ``axis`` may take ``value``."""
        allowed = self.values.get(axis)
        return allowed is None or value in allowed


@dataclass(slots=True)
class Rejections:
    """Candidates rejected, by reason: ``(level, key) -> (count, example message)``."""

    counts: dict[tuple[str, str], list[Any]] = field(default_factory=dict)

    def add(self, level: str, key: str, message: str, count: int = 1) -> None:
        """Count ``count`` candidates of ``level`` rejected for ``key`` (first message kept)."""
        entry = self.counts.setdefault((level, key), [0, message])
        entry[0] += count

    def merge(self, other: Rejections) -> None:
        """Add ``other``'s counts to these."""
        for (level, key), (count, message) in other.counts.items():
            self.add(level, key, message, count)

    def total(self, level: str | None = None) -> int:
        """Candidates rejected (at ``level``, or at every level)."""
        return sum(c for (lv, _), (c, _) in self.counts.items() if level in (None, lv))

    def rows(self) -> list[tuple[str, str, int, str]]:
        """``(level, key, count, example)`` rows, most frequent first."""
        items = [(lv, key, int(c), str(msg)) for (lv, key), (c, msg) in self.counts.items()]
        return sorted(items, key=lambda r: (-r[2], r[0], r[1]))


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def balanced_split(layers: int, chunks: int) -> tuple[int, ...]:
    """``layers`` over ``chunks`` as evenly as possible, the extra layers on the middle chunks.

    The first and last chunks also hold the embedding and the output layer, so they are the
    lighter ones: 126 layers over 16 stages gives 7, 8 x 14, 7 (Llama 3 405B, Dubey et al. 2024).
    """
    if not 1 <= chunks <= layers:
        raise ValueError(f"{chunks} chunks of {layers} layers: every chunk needs a layer")
    q, r = divmod(layers, chunks)
    start = (chunks - r) // 2
    return tuple(q + (start <= i < start + r) for i in range(chunks))


def stage_layers_for(layers: int, pp: int, virtual: int) -> tuple[int, ...] | None:
    """``None`` for an even split, else the balanced uneven one."""
    chunks = pp * virtual
    return None if layers % chunks == 0 else balanced_split(layers, chunks)


def _axis(axes: SearchAxes, name: str, candidates: list[Any]) -> list[Any]:
    if name in DEFAULT_AXIS_VALUES and name not in axes.values:
        candidates = [v for v in candidates if v in DEFAULT_AXIS_VALUES[name]]
    return [v for v in candidates if axes.allows(name, v)]


def splits(base: Scenario, axes: SearchAxes, rejections: Rejections
           ) -> Iterator[dict[str, Any]]:
    """Valid ``(tp, pp, cp, ep)`` splits of ``base``'s GPUs, with ``dp`` and ``tp_across_nodes``."""
    gpus, layers = base.cluster.gpus, base.model.layers
    check_search_gpus(gpus)
    domain = scale_up_domain(base.cluster.topology)
    for tp in _axis(axes, "tp", divisors(gpus)):
        for pp in _axis(axes, "pp", divisors(gpus // tp)):
            if pp > layers:
                rejections.add("split", "parallelism.pp", f"{pp} stages for {layers} layers: "
                               "every stage needs a layer")
                continue
            for cp in _axis(axes, "cp", divisors(gpus // (tp * pp))):
                dp = gpus // (tp * pp * cp)
                for etp, ep in expert_splits(base, axes, tp, tp * cp * dp):
                    values = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "expert_tp": etp, "dp": dp,
                              "tp_across_nodes": domain % tp != 0}
                    if _accepts(base, rejections, "split", {
                            **values, "micro_batch": 1, "schedule": "1f1b", "virtual_stages": 1,
                            "zero_stage": 0, "sequence_parallel": _moe_sp(base, tp),
                            "recompute": "none", "offload": "none",
                            "stage_layers": stage_layers_for(layers, pp, 1)}):
                        yield values


def expert_splits(base: Scenario, axes: SearchAxes, tp: int, ranks: int
                  ) -> list[tuple[int | None, int]]:
    """``(expert_tp, ep)`` candidates of a stage's ``ranks = tp*cp*dp`` GPUs: for a dense model
    ``(None, 1)``; for a MoE model expert TP 1 and ``tp`` (Megatron's default and the folded
    layout NVIDIA's MoE recipes use; every divisor of ``ranks`` where the search names
    ``expert_tp``), each with every EP size that divides ``ranks / expert_tp``."""
    if base.model.moe is None:
        return [(None, 1)] if axes.allows("ep", 1) else []
    etps = divisors(ranks) if "expert_tp" in axes.values else sorted({1, tp})
    return [(etp, ep) for etp in _axis(axes, "expert_tp", etps)
            for ep in _axis(axes, "ep", divisors(ranks // etp))]


def _moe_sp(base: Scenario, tp: int) -> bool:
    """The least demanding sequence-parallel choice of a split: off, except a MoE model with
    ``tp > 1`` (Megatron-Core trains it only with sequence parallelism)."""
    return base.model.moe is not None and tp > 1


def _accepts(base: Scenario, rejections: Rejections, level: str, values: dict[str, Any]) -> bool:
    try:
        build_layout(base, values)
    except SpecError as err:
        rejections.add(level, err.key, err.message)
        return False
    return True


def schedule_variants(base: Scenario, pp: int, axes: SearchAxes
                      ) -> Iterator[tuple[str, int, tuple[int, ...] | None]]:
    """``(schedule, virtual_stages, stage_layers)`` candidates for ``pp`` stages."""
    layers = base.model.layers
    for schedule in _axis(axes, "schedule", list(SCHEDULES)):
        if schedule != "interleaved":
            if axes.allows("virtual_stages", 1):
                yield schedule, 1, stage_layers_for(layers, pp, 1)
            continue
        top = min(axes.max_virtual_stages, layers // pp)
        for v in _axis(axes, "virtual_stages", list(range(2, top + 1))):
            yield schedule, v, stage_layers_for(layers, pp, v)


def layouts(base: Scenario, axes: SearchAxes, rejections: Rejections
            ) -> Iterator[ParallelismSpec]:
    """Every layout of ``base`` that the loader accepts, within ``axes``, in a fixed order.

    Rejected candidates are counted in ``rejections`` by level (``split``: a ``(tp, pp, cp, ep)``
    split; ``variant``: a schedule, ZeRO and sequence-parallel choice of a valid split) and key.
    """
    for split in splits(base, axes, rejections):
        for item in split_layouts(base, split, axes):
            if isinstance(item, ParallelismSpec):
                yield item
            else:
                rejections.add("variant", item[1].key, item[1].message)


Candidate = ParallelismSpec | tuple[dict[str, Any], SpecError]


def split_layouts(base: Scenario, split: dict[str, Any], axes: SearchAxes) -> Iterator[Candidate]:
    """The layouts of one valid ``split``, and ``(values, error)`` for each rejected variant."""
    zeros = [(z, off) for z in _axis(axes, "zero_stage", [0, 1, 2, 3])
             for off in _axis(axes, "offload", list(OFFLOADS))]
    sps = _axis(axes, "sequence_parallel", [False, True])
    recomputes = _axis(axes, "recompute", list(RECOMPUTE))
    micro = _axis(axes, "micro_batch", divisors(base.parallelism.global_batch // split["dp"]))
    for schedule, v, stage_layers in schedule_variants(base, split["pp"], axes):
        for zero, offload in zeros:
            for sp in sps:
                values = {**split, "micro_batch": 1, "schedule": schedule, "virtual_stages": v,
                          "stage_layers": stage_layers, "zero_stage": zero, "offload": offload,
                          "sequence_parallel": sp, "recompute": "none"}
                try:
                    first = build_layout(base, values)
                except SpecError as err:
                    yield values, err
                    continue
                yield from _completions(first, micro, recomputes)


def count_layouts(base: Scenario, split: dict[str, Any], axes: SearchAxes) -> int:
    """An upper bound of the layouts of ``split`` (its candidates), to size work chunks."""
    micro = _axis(axes, "micro_batch", divisors(base.parallelism.global_batch // split["dp"]))
    variants = sum(1 for _ in schedule_variants(base, split["pp"], axes))
    per = (len(_axis(axes, "zero_stage", [0, 1, 2, 3])) * len(_axis(axes, "offload", list(OFFLOADS)))
           * len(_axis(axes, "sequence_parallel", [False, True]))
           * len(_axis(axes, "recompute", list(RECOMPUTE))))
    return max(1, len(micro) * variants * per)


def _completions(first: ParallelismSpec, micro: list[int], recomputes: list[str]
                 ) -> Iterator[ParallelismSpec]:
    """``first`` at every micro-batch and recompute choice (the spec's own checks rerun)."""
    for mb in micro:
        for recompute in recomputes:
            yield ParallelismSpec(**{**_fields(first), "micro_batch": mb, "recompute": recompute})


def _fields(par: ParallelismSpec) -> dict[str, Any]:
    return {name: getattr(par, name) for name in ParallelismSpec.__dataclass_fields__}


def layout_values(par: ParallelismSpec) -> dict[str, Any]:
    """The layout keys of ``par`` as plain values (``stage_layers`` as text, '' when even)."""
    out = {key: getattr(par, key) for key in LAYOUT_KEYS}
    out["stage_layers"] = ",".join(map(str, par.stage_layers)) if par.stage_layers else ""
    return out
