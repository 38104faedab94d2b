"""The analytical model's caches change no number (issue 12, perf-speed).

Pinned: over ~200 layouts of six base scenarios, ``estimate_step`` and ``estimate_memory`` equal,
bit for bit, the values the code gave before any cache existed (``tests/golden/
layouts_analytical.json``, see :mod:`tests.golden.layouts_analytical`). Property: for random valid
layouts of three base scenarios, values computed on warm caches equal (``==``, whole dataclasses)
those computed right after :func:`simcluster.perf.clear_caches`. Keys: a changed accelerator or
fabric field is never served a value cached for another one.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.flows import contention
from simcluster.flows.contention import _contention
from simcluster.perf import clear_caches
from simcluster.perf.cache import Keyed, accelerator_key, topology_key
from simcluster.perf.collectives import collective_time
from simcluster.perf.memory import MemoryEstimate, estimate_memory
from simcluster.perf.step import StepEstimate, estimate_step
from simcluster.spec import check_layout
from simcluster.spec.hardware import GemmTileSpec
from simcluster.spec.scenario import Scenario
from tests.golden.layouts_analytical import (
    EXECUTIONS,
    FIXTURE,
    SCHEDULES,
    case_scenario,
    evaluate,
    load_base,
    scenario_for,
    stage_split,
)

CASES = json.loads(FIXTURE.read_text())
_BASES: dict[str, Scenario] = {}


def _base(name: str) -> Scenario:
    if name not in _BASES:
        _BASES[name] = load_base(name)
    return _BASES[name]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['base']}-{c['layout']['tp']}x"
                         f"{c['layout']['pp']}x{c['layout']['cp']}-{c['layout']['schedule']}")
def test_layout_matches_pre_cache_values(case: dict[str, Any]) -> None:
    assert evaluate(case_scenario(case, _BASES)) == case["expected"]


def test_fixture_is_cold_and_warm_alike() -> None:
    """The whole fixture in one process, caches cleared once: later cases hit entries of earlier
    ones (same groups, stage shapes, layer shapes) and still match."""
    clear_caches()
    assert [evaluate(case_scenario(c, _BASES)) for c in CASES] == [c["expected"] for c in CASES]


def _both(s: Scenario) -> tuple[MemoryEstimate, StepEstimate | str]:
    memory = estimate_memory(s, flash_attention=s.execution.flash_attention)
    try:
        return memory, estimate_step(s)
    except SpecError as err:
        return memory, str(err)


@st.composite
def layouts(draw: st.DrawFn) -> Scenario:
    """A valid layout of one of three bases (check_layout filters), with varied execution flags."""
    base = _base(draw(st.sampled_from(("gpt3-175b", "llama3-8b", "mixtral"))))
    tp, pp = draw(st.sampled_from((1, 2, 4, 8))), draw(st.sampled_from((1, 2, 4, 8, 16)))
    schedule, v = draw(st.sampled_from(SCHEDULES))
    layout = {"tp": tp, "pp": pp, "cp": draw(st.sampled_from((1, 2))),
              "ep": draw(st.sampled_from((1, 2, 4, 8))) if base.model.moe else 1,
              "micro_batch": draw(st.sampled_from((1, 2, 4))), "schedule": schedule,
              "virtual_stages": v, "recompute": draw(st.sampled_from(("none", "selective", "full"))),
              "sequence_parallel": tp > 1 and draw(st.booleans()),
              "zero_stage": draw(st.sampled_from((0, 1, 2, 3) if pp == 1 else (0, 1))),
              "stage_layers": stage_split(base.model.layers, pp * v)}
    try:
        check_layout(base, **layout)
    except SpecError:
        assume(False)
    return scenario_for(base, layout, draw(st.sampled_from(EXECUTIONS)),
                        draw(st.sampled_from((None, "fp16"))))


@given(layouts(), st.lists(layouts(), max_size=3))
def test_warm_caches_equal_cold(s: Scenario, others: list[Scenario]) -> None:
    clear_caches()
    cold = _both(s)
    for other in others:  # fill the caches with neighbours' entries
        _both(other)
    assert _both(s) == cold
    clear_caches()
    assert _both(s) == cold


def _with_accelerator(s: Scenario, **changes: object) -> Scenario:
    topo = s.cluster.topology
    acc = dataclasses.replace(topo.accelerator, **changes)  # type: ignore[arg-type]
    cluster = dataclasses.replace(s.cluster, topology=dataclasses.replace(topo, accelerator=acc))
    return dataclasses.replace(s, cluster=cluster)


@pytest.mark.parametrize("changes", [{"memory_efficiency": 0.5},
                                     {"gemm_tiles": None, "gemm_half_dim": 512},
                                     {"matmul_efficiency": {"bf16": 0.5}},
                                     {"gemm_tiles": GemmTileSpec(sms=108, tile_m=256, tile_n=128,
                                                                 k_overhead=86.0,
                                                                 reference_mnk=(1024, 10240, 5120))}])
def test_accelerator_change_is_a_new_key(changes: dict[str, object]) -> None:
    s = _base("gpt3-175b")
    changed = _with_accelerator(s, **changes)
    clear_caches()
    expected = estimate_step(changed)
    clear_caches()
    assert estimate_step(s) != expected  # warm with the original accelerator's entries
    assert estimate_step(changed) == expected


def test_fabric_change_is_a_new_key() -> None:
    s = _base("gpt3-175b")
    topo = s.cluster.topology
    slower = dataclasses.replace(topo, scale_out=dataclasses.replace(
        topo.scale_out, nic_Bps=topo.scale_out.nic_Bps / 2))
    changed = dataclasses.replace(s, cluster=dataclasses.replace(s.cluster, topology=slower))
    clear_caches()
    expected = estimate_step(changed)
    clear_caches()
    estimate_step(s)
    assert estimate_step(changed) == expected
    assert expected.breakdown.dp_comm != estimate_step(s).breakdown.dp_comm


def test_keys_hold_dicts_as_items() -> None:
    acc = _base("gpt3-175b").cluster.topology.accelerator
    key = accelerator_key(acc)
    hash(key)
    assert tuple(acc.peak_flops_per_s.items()) in key
    assert Keyed(acc, key) == Keyed(dataclasses.replace(acc), accelerator_key(acc))
    assert Keyed(acc, key) != Keyed(acc, accelerator_key(dataclasses.replace(acc, tdp_W=1.0)))
    hash(topology_key(_base("gpt3-175b").cluster.topology))


def test_clear_caches_empties_them() -> None:
    estimate_step(_base("llama3-8b"))
    assert collective_time.cache_info().currsize > 0  # type: ignore[attr-defined]
    clear_caches()
    assert collective_time.cache_info().currsize == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("layout", [{"tp": 4, "pp": 1}, {"tp": 2, "pp": 2}, {"tp": 1, "pp": 4},
                                    {"tp": 8, "pp": 2}])
def test_contention_cached_equals_fresh(layout: dict[str, int]) -> None:
    base = _base("oversubscribed")
    full = {"cp": 1, "ep": 1, "micro_batch": 1, "schedule": "1f1b", "virtual_stages": 1,
            "recompute": "selective", "sequence_parallel": False, "zero_stage": 1,
            "stage_layers": None, **layout}
    check_layout(base, **full)
    s = scenario_for(base, full)
    clear_caches()
    cold = contention(s)
    cold["dp_comm"] = -1.0  # the caller's dict is its own: the cache is not touched
    assert contention(s) == contention(s) != cold
    par = s.parallelism
    fresh = dict(_contention.__wrapped__(Keyed(s.cluster.topology, None), s.cluster.nodes,  # type: ignore[attr-defined]
                                          par.tp * par.cp, par.dp, par.pp, True, ()))
    assert contention(s) == fresh
