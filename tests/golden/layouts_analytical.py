"""Layouts of a few base scenarios and their analytical step and memory, pinned bit for bit.

``tests/golden/layouts_analytical.json`` holds, for about 200 layouts of six base scenarios (GPT-3
175B on 1024 A100, Llama 3 405B on 16,384 H100, Llama 3 8B on 16 H100, a 10B GPT on 3090 Ti boxes,
Mixtral 8x7B on 16 H100 and GPT-3 7.5B behind an oversubscribed spine), with execution flags and
precisions varied, a SHA-256 of ``repr`` of ``estimate_step`` and of ``estimate_memory`` (``repr``
of a float round-trips exactly, so equal digests mean every float is equal) plus the headline
numbers for reading a diff. The file was written by this script from the code before the
analytical caches existed (perf-speed work of issue 12); the caches must not change a bit of it.

Regenerate only on purpose, and review the diff: ``python -m tests.golden.layouts_analytical``.

The layout enumeration here (:func:`layout_space`) is a test and benchmark helper, not the sweep's:
a Cartesian product of the usual choices, filtered by :func:`simcluster.spec.check_layout`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simcluster.errors import SpecError
from simcluster.perf.memory import estimate_memory
from simcluster.perf.step import estimate_step
from simcluster.spec import check_layout, load_scenario
from simcluster.spec.scenario import ParallelismSpec, Scenario

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("layouts_analytical.json")
Layout = dict[str, Any]

#: Base scenarios: name -> (scenario file, ``--set`` overrides).
BASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gpt3-175b": ("gpt3-175b-1024xa100.yaml", ()),
    "llama3-405b": ("llama3-405b-16k-h100.yaml", ()),
    "llama3-8b": ("default.yaml", ()),
    "gpt-10b-3090ti": ("gpt-10b-4x3090ti.yaml", ()),
    "mixtral": ("default.yaml", ("model=mixtral-8x7b", "parallelism.global_batch=64")),
    "oversubscribed": ("oversubscribed-spine.yaml", ()),
}
#: Execution variants cycled over the fixture's layouts (every code path of the step model).
EXECUTIONS: tuple[dict[str, bool | str], ...] = (
    {}, {"overlap_grad_reduce": False}, {"grad_accumulation_fusion": False},
    {"attention": "math", "flash_attention": False}, {"zero3_prefetch": False},
    {"scatter_gather": False},
)
SCHEDULES: tuple[tuple[str, int], ...] = (
    ("1f1b", 1), ("gpipe", 1), ("zb-h1", 1), ("interleaved", 2), ("interleaved", 3),
    ("interleaved", 4),
)


def load_base(name: str) -> Scenario:
    """The base scenario ``name`` of :data:`BASES`."""
    file, overrides = BASES[name]
    return load_scenario(ROOT / "scenarios" / file, overrides)


def stage_split(layers: int, chunks: int) -> tuple[int, ...] | None:
    """None when ``chunks`` divides ``layers``; else the first and last chunks a layer short each
    (Llama 3 405B's split), the rest ``ceil(layers / chunks)``."""
    if layers % chunks == 0:
        return None
    size = -(-layers // chunks)
    short = size * chunks - layers
    sizes = [size] * chunks
    for i in range(short):
        sizes[i // 2 if i % 2 == 0 else chunks - 1 - i // 2] -= 1
    return tuple(sizes)


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def _candidates(base: Scenario, tps: tuple[int, ...], pps: tuple[int, ...],
                cps: tuple[int, ...], eps: tuple[int, ...], max_mb: int) -> Iterator[Layout]:
    gpus, layers = base.cluster.gpus, base.model.layers
    batch = base.parallelism.global_batch
    for tp, pp, cp, ep in itertools.product(tps, pps, cps, eps):
        if gpus % (tp * pp * cp):
            continue
        dp = gpus // (tp * pp * cp)
        if batch % dp:
            continue
        for mb, (schedule, v), recompute, sp, zero in itertools.product(
                _divisors(batch // dp, max_mb), SCHEDULES, ("none", "selective", "full"),
                (False, True), (0, 1, 2, 3)):
            if (sp and tp == 1) or (zero >= 2 and pp > 1) or (v > 1 and pp == 1):
                continue
            yield {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "micro_batch": mb, "schedule": schedule,
                   "virtual_stages": v, "recompute": recompute, "sequence_parallel": sp,
                   "zero_stage": zero, "stage_layers": stage_split(layers, pp * v)}


def layout_space(base: Scenario, *, tps: tuple[int, ...] = (1, 2, 4, 8),
                 pps: tuple[int, ...] = (1, 2, 4, 8, 16, 32), cps: tuple[int, ...] = (1, 2),
                 eps: tuple[int, ...] = (1,), max_mb: int = 8) -> list[Layout]:
    """Every layout of the product of the choices that :func:`check_layout` accepts.

    ``pp`` and the virtual stages split the layers evenly where they divide them, else as
    :func:`stage_split` does. ZeRO 2 and 3 only with ``pp = 1``; sequence parallelism with
    ``tp > 1``; micro-batches divide the per-replica batch, up to ``max_mb``.
    """
    out = []
    for layout in _candidates(base, tps, pps, cps, eps, max_mb):
        try:
            check_layout(base, **layout)
        except SpecError:
            continue
        out.append(layout)
    return out


def scenario_for(base: Scenario, layout: Layout, execution: dict[str, bool] | None = None,
                 precision: str | None = None) -> Scenario:
    """``base`` with the ``layout`` (``dp`` derived) and optional execution flags and precision."""
    values = {f.name: getattr(base.parallelism, f.name)
              for f in dataclasses.fields(ParallelismSpec)}
    values.update(layout)
    values["dp"] = base.cluster.gpus // (layout["tp"] * layout["pp"] * layout["cp"])
    changes: dict[str, Any] = {"parallelism": ParallelismSpec(**values)}
    if execution:
        changes["execution"] = dataclasses.replace(base.execution, **execution)
    if precision is not None:
        changes["precision"] = precision
    return dataclasses.replace(base, **changes)


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()


def evaluate(s: Scenario) -> dict[str, Any]:
    """The pinned values of one scenario: digests of the step and memory, headline numbers."""
    memory = estimate_memory(s, flash_attention=s.execution.flash_attention)
    out: dict[str, Any] = {"memory": _digest(memory), "peak_bytes": repr(memory.peak_bytes)}
    try:
        step = estimate_step(s)
    except SpecError as err:
        return {**out, "step": f"SpecError: {err}"}
    return {**out, "step": _digest(step), "iteration_time_s": repr(step.iteration_time_s)}


def fixture_cases(per_base: int = 34) -> list[dict[str, Any]]:
    """``per_base`` layouts of each base, drawn by a ``random.Random`` seeded with its name."""
    cases = []
    for name in BASES:
        base = load_base(name)
        eps = (1, 2, 4, 8) if base.model.moe else (1,)
        space = layout_space(base, eps=eps)
        picked = sorted(random.Random(name).sample(range(len(space)), per_base))  # own stream
        for i, layout in enumerate(space[k] for k in picked):
            execution = EXECUTIONS[i % len(EXECUTIONS)]
            precision = "fp16" if i % 7 == 3 else None
            cases.append({"base": name, "layout": layout, "execution": execution,
                          "precision": precision})
    return cases


def case_scenario(case: dict[str, Any], bases: dict[str, Scenario]) -> Scenario:
    """The scenario of one fixture case (``bases`` caches the loaded base scenarios)."""
    name = case["base"]
    if name not in bases:
        bases[name] = load_base(name)
    layout = dict(case["layout"])
    if layout["stage_layers"] is not None:
        layout["stage_layers"] = tuple(layout["stage_layers"])
    return scenario_for(bases[name], layout, case["execution"], case["precision"])


def main() -> None:
    """Write :data:`FIXTURE` from the current code."""
    bases: dict[str, Scenario] = {}
    cases = fixture_cases()
    for case in cases:
        case["expected"] = evaluate(case_scenario(case, bases))
    FIXTURE.write_text(json.dumps(cases, indent=1) + "\n")
    print(f"{len(cases)} cases written to {FIXTURE}")


if __name__ == "__main__":
    main()
