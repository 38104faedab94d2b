"""The layout enumeration against brute force: the Cartesian product filtered by load_scenario."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.run.single import simulate
from simcluster.spec import load_scenario
from simcluster.sweep.evaluate import AnalyticalTask, Setting
from simcluster.sweep.runner import Chunk
from simcluster.sweep.space import (
    LAYOUT_KEYS,
    Rejections,
    SearchAxes,
    balanced_split,
    divisors,
    layout_values,
    layouts,
    splits,
    stage_layers_for,
)

TINY: dict[str, Any] = {
    "model": {"name": "tiny", "layers": 6, "hidden": 256, "heads": 8, "kv_heads": 4,
              "ffn_hidden": 1024, "vocab": 1000, "seq_len": 256},
    "cluster": {"topology": "dgx-a100-80gb", "nodes": 2},
    "parallelism": {"global_batch": 16},
}
TINY_MOE: dict[str, Any] = {
    **TINY, "cluster": {"topology": "dgx-a100-80gb", "nodes": 1},
    "model": {**TINY["model"], "moe": {"experts": 4, "top_k": 2}},
}
#: A small MoE model in FP8 on 4 H100 cut to 3.5 GiB each, so that about half of its layouts do
#: not fit (2.2 to 4.4 GiB): the memory check counts Transformer Engine's FP8 weight copies and
#: the experts' sharding, and the best layout that fits is brute force's too.
TINY_MOE_FP8: dict[str, Any] = {
    **TINY_MOE, "precision": "fp8",
    "cluster": {"topology": {"preset": "dgx-h100", "gpus_per_node": 4,
                             "accelerator": {"preset": "h100-sxm", "memory_GiB": 3.5}},
                "nodes": 1},
    "model": {**TINY["model"], "ffn_act": "swiglu",
              "moe": {"experts": 8, "top_k": 2, "shared_experts": 1}},
}
# Restricted so the brute force stays small; the enumerator gets the same restriction.
AXES = SearchAxes(values={"recompute": ("none", "full"), "zero_stage": (0, 1, 2),
                          "schedule": ("1f1b", "interleaved", "gpipe")}, max_virtual_stages=3)
#: Names every expert TP size of 8 GPUs: the enumeration then tries each (by default only 1 and
#: tp: :func:`test_default_expert_tp_search_is_one_and_tp`).
AXES_MOE = SearchAxes(values={"recompute": ("none",), "zero_stage": (0, 2),
                              "schedule": ("1f1b", "interleaved"), "expert_tp": (1, 2, 4, 8)},
                      max_virtual_stages=2)


@functools.cache
def _brute(name: str) -> frozenset[tuple[Any, ...]]:
    """Every combination of a superset of the axes that load_scenario accepts."""
    source, axes, moe = CASES[name]
    base = load_scenario(source)
    gpus, layers = base.cluster.gpus, base.model.layers
    valid = set()
    values = axes.values
    grid = itertools.product(
        range(1, gpus + 1), range(1, layers + 1), (1, 2, 3, 4, 8, 16), (1, 2, 4, 8) if moe else (1,),
        (1, 2, 3, 4, 8, 16), values["schedule"], range(1, axes.max_virtual_stages + 1),
        values["recompute"], (False, True), values["zero_stage"], (1, 2, 4, 8) if moe else (None,))
    for tp, pp, cp, ep, mb, sched, v, rec, sp, zero, etp in grid:
        # Only the definition of dp (an integer) and of a schedule without virtual stages prune
        # here; every rule is the loader's.
        if gpus % (tp * pp * cp) or (sched != "interleaved" and v > 2):
            continue
        par = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "micro_batch": mb, "schedule": sched,
               "virtual_stages": v, "recompute": rec, "sequence_parallel": sp, "zero_stage": zero,
               "tp_across_nodes": 8 % tp != 0, "expert_tp": etp}
        if pp * v <= layers:
            par["stage_layers"] = stage_layers_for(layers, pp, v)
        overrides = [f"parallelism.{k}={_yaml(x)}" for k, x in par.items()]
        try:
            s = load_scenario(source, overrides)
        except SpecError:
            continue
        valid.add(tuple(layout_values(s.parallelism).values()))
    return frozenset(valid)


def _yaml(x: object) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, tuple):
        return "[" + ",".join(map(str, x)) + "]"
    return str(x)


def _enumerated(source: dict[str, Any], axes: SearchAxes) -> list[tuple[Any, ...]]:
    base = load_scenario(source)
    return [tuple(layout_values(p).values()) for p in layouts(base, axes, Rejections())]


CASES = {"dense": (TINY, AXES, False), "moe": (TINY_MOE, AXES_MOE, True),
         "moe-fp8": (TINY_MOE_FP8, AXES_MOE, True)}


@pytest.mark.parametrize("name", ["dense", "moe"])
def test_enumeration_is_exactly_what_the_loader_accepts(name: str) -> None:
    source, axes, _ = CASES[name]
    found = _enumerated(source, axes)
    assert len(found) == len(set(found)), "a layout enumerated twice"
    assert set(found) == _brute(name)
    keys = list(LAYOUT_KEYS)
    assert any(k[keys.index("stage_layers")] for k in found), "no uneven split was reached"
    assert any(k[keys.index("schedule")] == "interleaved" for k in found)
    if name == "moe":
        assert any(k[keys.index("ep")] > 1 for k in found), "no expert-parallel layout reached"


def test_default_expert_tp_search_is_one_and_tp() -> None:
    """Unless the search names ``expert_tp``, a MoE split tries the experts split like TP and
    whole experts per GPU (expert TP 1, the EP group folded over the TP ranks): exactly brute
    force's layouts with those two values."""
    source, axes, _ = CASES["moe"]
    named = {k: v for k, v in axes.values.items() if k != "expert_tp"}
    found = set(_enumerated(source, SearchAxes(values=named,
                                               max_virtual_stages=axes.max_virtual_stages)))
    keys = list(LAYOUT_KEYS)
    tp, etp, ep = (keys.index(k) for k in ("tp", "expert_tp", "ep"))
    assert found == {k for k in _brute("moe") if k[etp] in (1, k[tp])}
    assert any(k[etp] == 1 and k[tp] > 1 and k[ep] > k[keys.index("dp")] for k in found), (
        "no layout whose EP group spans the TP ranks")


@pytest.mark.parametrize("name", ["dense", "moe-fp8"])
def test_best_layout_equals_brute_force_best(name: str) -> None:
    source, axes, _ = CASES[name]
    # headroom 0: the sweep's fit test is then exactly the run's ``fits_in_memory``
    task = AnalyticalTask(source, (), (Setting("", ()),), axes, headroom_gib=0.0)
    base = task.base(0)
    rows = []
    for i, split in enumerate(splits(base, axes, Rejections())):
        rows += task(Chunk(i, ((0, tuple(split.items())),)))
    ok = [r for r in rows if r["status"] == "ok"]
    best = min(ok, key=lambda r: r["step_time_s"])
    # Brute force: every valid layout through the single-run path of `simcluster run --fast`.
    times = []
    for key in sorted(_brute(name), key=repr):
        values = dict(zip(LAYOUT_KEYS, key, strict=True))
        layers = values.pop("stage_layers")
        overrides = [f"parallelism.{k}={_yaml(x)}" for k, x in values.items() if k != "dp"]
        overrides.append(f"parallelism.stage_layers={'[' + layers + ']' if layers else 'null'}")
        run = simulate(load_scenario(source, overrides), engine="analytical").to_dict()
        if run["fits_in_memory"]:
            times.append(run["iteration_time_s"])
    assert len(times) == len(ok)
    assert best["step_time_s"] == min(times)
    if name == "moe-fp8":  # the memory check decided: some layouts did not fit
        assert 0 < len(times) < len(_brute(name))


def test_rejections_are_counted_by_key() -> None:
    rejections = Rejections()
    base = load_scenario(TINY)
    list(layouts(base, AXES, rejections))
    keys = {key for _, key, _, _ in rejections.rows()}
    # heads=8: tp=16 rejected; pp=2 with ZeRO-2; interleaved with pp=1; sp with tp=1.
    assert {"parallelism.tp", "parallelism.zero_stage", "parallelism.schedule",
            "parallelism.sequence_parallel"} <= keys
    assert rejections.total() == sum(c for _, _, c, _ in rejections.rows())


def test_balanced_split_oracle() -> None:
    assert balanced_split(126, 16) == (7,) + (8,) * 14 + (7,)  # Llama 3 405B, Dubey et al. 2024
    assert balanced_split(10, 4) == (2, 3, 3, 2)
    assert balanced_split(8, 4) == (2, 2, 2, 2)
    with pytest.raises(ValueError, match="every chunk needs a layer"):
        balanced_split(3, 4)


@given(st.integers(1, 500), st.integers(1, 64))
def test_balanced_split_properties(layers: int, chunks: int) -> None:
    if chunks > layers:
        return
    split = balanced_split(layers, chunks)
    assert (sum(split), len(split)) == (layers, chunks)
    assert max(split) - min(split) <= 1
    extra = layers % chunks
    if (chunks - extra) % 2 == 0:  # the extra layers can sit exactly in the middle
        assert split == split[::-1]
    if extra <= chunks - 2:  # the ends (embedding, logits) are the lighter chunks when they can be
        assert (split[0], split[-1]) == (min(split), min(split))


@given(st.integers(1, 10**6))
def test_divisors(n: int) -> None:
    found = divisors(n)
    assert found == sorted(found)
    assert (found[0], found[-1]) == (1, n)
    assert all(n % d == 0 for d in found)
    small = [d for d in range(1, min(n, 3000) + 1) if n % d == 0]
    assert [d for d in found if d <= 3000] == small
