"""ZeRO-Offload and ZeRO-Infinity's CPU offload (``parallelism.offload``, perf/offload.py): each
formula against hand numbers, the memory check against the host's memory, both engines, the sweep
axis, and scenarios without the key unchanged.

Sources: Ren et al., ZeRO-Offload, USENIX ATC'21 (arXiv 2101.06840), sections 3-5; Rajbhandari et
al., ZeRO-Infinity, SC'21 (arXiv 2104.07857), section 6.1; DeepSpeed ``stage_1_and_2.py`` (the
fp32 gradient partition on the offload device), ``runtime/zero/config.py`` (offload rules) and
PR #735 (CPU Adam: 11.6B parameters in 8.2 s). The hand numbers use a 13,790,208-parameter GPT
(tests/unit/test_zero_sharding.py counts it) on 3090 Ti boxes: PCIe 4.0 x16, 32 GB/s, one GPU
per link, pinned copies at 0.86 of it (27.52 GB/s), four GPUs per box.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.perf import comm_plan
from simcluster.perf.collectives import collective_time
from simcluster.perf.memory import estimate_memory, stage_params
from simcluster.perf.offload import (
    HOST_STATE_BYTES,
    HostStep,
    cpu_adam_s,
    gpu_bytes,
    host_bytes_per_param,
    host_refusal,
    host_step,
    layer_copies_s,
    pcie_copy_s,
    shard_params,
)
from simcluster.perf.step import estimate_step
from simcluster.perf.zero3 import zero3_layer
from simcluster.sim import simulate_step
from simcluster.spec import Scenario, load_scenario
from simcluster.spec.hardware import CPU_ADAM_PARAMS_PER_S
from simcluster.sweep.config import axes_from
from simcluster.sweep.evaluate import AnalyticalTask, Setting
from simcluster.sweep.runner import Chunk
from simcluster.sweep.space import LAYOUT_KEYS, Rejections, SearchAxes, layouts, splits
from tests.golden.sim_cases import tiny

PARAMS = 13_790_208  # the tiny GPT, tp = pp = 1
PINNED_BPS = 32e9 * 0.86  # PCIe 4.0 x16 at the measured pinned-copy rate
PROPS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _tiny(zero: int, offload: str, precision: str = "bf16", **kwargs: Any) -> Scenario:
    """The tiny GPT on 2 boxes of four RTX 3090 Ti: dp 8, 2 micro-batches."""
    s = tiny(tp=1, pp=1, zero_stage=zero, offload=offload, **kwargs)
    return s if precision == "bf16" else dataclasses.replace(s, precision=precision)


def _compute_bound(zero: int, offload: str, prefetch: bool = True) -> Scenario:
    """50M parameters per layer against ~0.9 TFLOP per layer and micro-batch on 16 A100
    (tests/unit/test_zero_sharding.py): every hidden transfer hides, so both engines agree."""
    model = {"name": "wide", "layers": 4, "hidden": 2048, "heads": 16, "vocab": 1024,
             "seq_len": 2048}
    return load_scenario({
        "name": "wide", "model": model, "precision": "bf16",
        "cluster": {"topology": "dgx-a100-80gb", "nodes": 2},
        "execution": {"comm_sms": 0, "zero3_prefetch": prefetch},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": 64, "micro_batch": 4,
                        "zero_stage": zero, "offload": offload}})


# The formulas, by hand ---------------------------------------------------------------------------


def test_a_pcie_copy_runs_at_the_pinned_rate_shared_by_a_switch() -> None:
    # 1 GB over one 3090 Ti's own x16 link; on a DGX A100 two GPUs share each switch's uplink
    assert pcie_copy_s(_tiny(1, "optimizer"), 1e9) == pytest.approx(1e9 / 27.52e9, rel=1e-12)
    a100 = _compute_bound(1, "optimizer")
    assert pcie_copy_s(a100, 1e9) == pytest.approx(2 * 1e9 / 27.52e9, rel=1e-12)


def test_cpu_adam_serves_every_gpu_of_the_node_at_the_cited_rate() -> None:
    # DeepSpeed PR #735: 11.6B parameters in 8.2 s; four GPUs' 1B-parameter shards: 2.837 s
    assert pytest.approx(11.6e9 / 8.2, rel=5e-3) == CPU_ADAM_PARAMS_PER_S  # 3 digits
    assert cpu_adam_s(_tiny(1, "optimizer"), 1e9) == pytest.approx(4e9 / 1.41e9, rel=1e-12)


@pytest.mark.parametrize(("offload", "zero", "expected"), [
    ("none", 1, (2.0, 4.0, 1.5)),               # ZeRO-1 over 8: 2 + 4 + 12/8
    ("optimizer", 1, (2.0, 4.0, 0.0)),          # the GPU keeps its full gradient buffer
    ("optimizer", 2, (2.0, 0.0, 0.0)),          # the gradient shard goes to the host
    ("optimizer+params", 3, (0.0, 0.0, 0.0)),   # the weight shard too
])
def test_what_stays_on_the_gpu(offload: str, zero: int, expected: tuple[float, ...]) -> None:
    sharded = {1: (2.0, 4.0, 1.5), 2: (2.0, 0.5, 1.5), 3: (0.25, 0.5, 1.5)}[zero]
    assert gpu_bytes(*sharded, offload, zero) == expected


@pytest.mark.parametrize(("offload", "precision", "expected"), [
    ("none", "bf16", 0.0), ("optimizer", "bf16", 16.0), ("optimizer+params", "bf16", 18.0),
    ("optimizer", "fp32", 16.0), ("optimizer+params", "fp32", 16.0)])
def test_host_bytes_per_shard_parameter(offload: str, precision: str, expected: float) -> None:
    """fp32 master 4 + Adam moments 8 + the fp32 gradient partition 4; the 16-bit weights too when
    offloaded (an fp32 model fetches its fp32 master)."""
    zero = 3 if offload == "optimizer+params" else 1
    assert HOST_STATE_BYTES == 16.0
    assert host_bytes_per_param(_tiny(zero, offload, precision=precision)) == expected


@pytest.mark.parametrize(("zero", "copies"), [(1, 1), (2, 2), (3, 2)])
def test_the_host_step_of_zero_offload_by_hand(zero: int, copies: int) -> None:
    """Shard 13,790,208 / 8 = 1,723,776 parameters: fp32 gradients down (once, or every one of the
    2 micro-batches under ZeRO-2/3), Adam on 4 x the shard at 1.41e9/s, bf16 weights back."""
    s = _tiny(zero, "optimizer")
    step = host_step(s, PARAMS, 0.0, 4)
    assert step == HostStep(pytest.approx(1_723_776 * 4 / PINNED_BPS, rel=1e-12), copies,
                            pytest.approx(4 * 1_723_776 / 1.41e9, rel=1e-12),
                            pytest.approx(1_723_776 * 2 / PINNED_BPS, rel=1e-12))
    # each copy hides behind a backward it does not outlast; 1 ms of backward hides all of it
    assert step is not None
    assert step.total_s(1e-3) == pytest.approx(step.adam_s + step.param_copy_s, rel=1e-12)
    assert step.total_s(0.0) == pytest.approx(
        copies * step.grad_copy_s + step.adam_s + step.param_copy_s, rel=1e-12)
    assert host_step(_tiny(zero, "none"), PARAMS, 0.0, 4) is None


def test_zero_infinity_moves_each_layers_shard_over_pcie_around_its_collectives() -> None:
    """A layer of 13,790,208 / 4 parameters, 1/8 of it per GPU: 430,944 bf16 weights fetched before
    the all-gather, as many fp32 gradients drained after the reduce-scatter; the step keeps only
    the CPU's Adam."""
    s, plain = _tiny(3, "optimizer+params"), _tiny(3, "optimizer")
    fetch, drain = layer_copies_s(s, PARAMS / 4, 4)
    assert fetch == pytest.approx(430_944 * 2 / PINNED_BPS, rel=1e-12)
    assert drain == pytest.approx(430_944 * 4 / PINNED_BPS, rel=1e-12)
    assert layer_copies_s(plain, PARAMS / 4, 4) == (0.0, 0.0)
    g = comm_plan.groups(s)
    assert g.dp is not None
    layer, base = zero3_layer(s, g, PARAMS), zero3_layer(plain, g, PARAMS)
    assert layer is not None
    assert base is not None
    assert base.gather_s == collective_time("all_gather", PARAMS / 4 * 2, g.dp).time_s
    assert layer.gather_s == pytest.approx(fetch + base.gather_s, rel=1e-12)
    assert layer.scatter_s == pytest.approx(base.scatter_s + drain, rel=1e-12)
    step = host_step(s, PARAMS, 0.0, 4)
    assert step == HostStep(0.0, 0, pytest.approx(4 * 1_723_776 / 1.41e9, rel=1e-12), 0.0)


def test_one_gpu_without_data_parallelism_fetches_whole_layers() -> None:
    # tp 2 on one box of two: dp 1, so each layer (on this TP rank) is fetched whole over PCIe
    s = tiny(nodes=1, tp=2, pp=1, batch=4, topology="box-2x3090ti-nvlink", zero_stage=3,
             offload="optimizer+params")
    assert comm_plan.groups(s).dp is None
    held = stage_params(s.model, s.parallelism, 0, s.model.layers).dense
    layer = zero3_layer(s, comm_plan.groups(s), held)
    assert layer is not None
    assert layer.gather_s == pytest.approx(held / 4 * 2 / PINNED_BPS, rel=1e-12)
    assert zero3_layer(dataclasses.replace(s, parallelism=dataclasses.replace(
        s.parallelism, offload="optimizer")), comm_plan.groups(s), held) is None


# Memory: the GPU's and the host's ----------------------------------------------------------------


def test_the_host_memory_of_a_node_is_its_gpus_shards() -> None:
    memory = estimate_memory(_tiny(1, "optimizer"))
    assert memory.host_bytes == pytest.approx(4 * 1_723_776 * 16, rel=1e-12)
    assert memory.host_capacity_bytes is None
    assert memory.fits_in_host
    assert estimate_memory(_tiny(1, "none")).host_bytes == 0.0


def test_a_host_too_small_for_the_offloaded_state_does_not_fit() -> None:
    """The memory check refuses it as it refuses a GPU too small, naming the file and the key;
    the sweep's analytical pass does not time it."""
    path = "scenarios/seed-10b-boxes.yaml"
    small = load_scenario(path, ["parallelism.offload=optimizer",
                                 "cluster.topology.host.memory_GiB=4"])
    memory = estimate_memory(small)
    assert memory.peak_bytes <= memory.capacity_bytes  # the GPUs have room
    assert not memory.fits_in_host
    assert not memory.fits_in_memory
    reason = host_refusal(memory.host_bytes, memory.host_capacity_bytes, small.cluster.topology)
    assert "host.memory_GiB of topologies/box-2x3090ti-nvlink.yaml" in reason
    assert "4.9 GiB of host memory per node, 4.0 GiB available" in reason
    big = load_scenario(path, ["parallelism.offload=optimizer",
                               "cluster.topology.host.memory_GiB=64"])
    assert estimate_memory(big).fits_in_memory
    task = AnalyticalTask(path, ("cluster.topology.host.memory_GiB=4",), (Setting("", ()),),
                          SearchAxes(), search=False)
    row = task.row(small, small.parallelism)
    assert row["status"] == "memory"
    assert row["reason"] == reason


def test_a_bad_offload_is_refused_naming_the_file_the_key_and_what_was_expected(
        tmp_path: Path) -> None:
    path = "scenarios/seed-10b-boxes.yaml"
    text = Path(path).read_text(encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  zero_stage: 1\n", "  zero_stage: 1\n  offload: optimizer+params\n",
                                1), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_scenario(bad)
    assert err.value.key == "parallelism.offload"
    assert err.value.source == str(bad)
    assert err.value.message == ("optimizer+params needs zero_stage 3 (the parameters are "
                                 "offloaded as ZeRO-3 shards), got zero_stage 1")
    with pytest.raises(SpecError, match="needs zero_stage >= 1"):
        load_scenario(path, ["parallelism.offload=optimizer", "parallelism.zero_stage=0"])
    with pytest.raises(SpecError, match=r"parallelism.offload: 'nvme' is not one of none \| optim"):
        load_scenario(path, ["parallelism.offload=nvme"])


@PROPS
@given(zero=st.sampled_from([1, 2, 3]), offload=st.sampled_from(["optimizer", "optimizer+params"]),
       micro_batch=st.sampled_from([1, 2]), recompute=st.sampled_from(["none", "full"]),
       precision=st.sampled_from(["bf16", "fp16", "fp32"]))
def test_offload_never_adds_gpu_memory(zero: int, offload: str, micro_batch: int,
                                       recompute: str, precision: str) -> None:
    if offload == "optimizer+params":
        zero = 3
    kw = {"micro_batch": micro_batch, "recompute": recompute, "precision": precision}
    on, off = estimate_memory(_tiny(zero, offload, **kw)), estimate_memory(_tiny(zero, "none", **kw))
    for a, b in zip(on.stages, off.stages, strict=True):
        assert a.total_bytes <= b.total_bytes
        assert a.optimizer_bytes == 0.0
    assert on.host_bytes > 0.0 == off.host_bytes


# Time: both engines ------------------------------------------------------------------------------


@PROPS
@given(zero=st.sampled_from([1, 2, 3]), rate=st.floats(1e8, 1e11),
       faster=st.floats(1.0, 100.0), batch=st.sampled_from([8, 16, 32]))
def test_zero_offload_only_changes_the_optimizer_and_a_faster_cpu_never_slows_it(
        zero: int, rate: float, faster: float, batch: int) -> None:
    """Under ``optimizer`` every category but the optimizer step is the GPU-only step's, the step
    holds the node's CPU Adam, and a faster CPU never makes the step slower."""
    def step(offload: str, adam: float) -> Any:
        return estimate_step(tiny(tp=1, pp=1, zero_stage=zero, offload=offload, batch=batch,
                                  topology={"preset": "box-4x3090ti-nvlink",
                                            "host": {"cpu_adam_params_per_s": adam}}))
    on, off, fast = step("optimizer", rate), step("none", rate), step("optimizer", rate * faster)
    for key, value in off.breakdown.as_dict().items():
        if key != "optimizer":
            assert on.breakdown.as_dict()[key] == value, key
    assert on.breakdown.optimizer >= 4 * PARAMS / 8 / rate * (1 - 1e-12)
    assert fast.iteration_time_s <= on.iteration_time_s


@PROPS
@given(micro_batch=st.sampled_from([1, 2]), prefetch=st.booleans())
def test_zero_infinity_never_exposes_less_than_zero_3_offload(micro_batch: int,
                                                              prefetch: bool) -> None:
    """Fetching the weights over PCIe only adds to ZeRO-3's gathers and scatters (and saves the
    copy back after the step): the exposed DP time never falls."""
    kw = {"micro_batch": micro_batch, "execution": {"zero3_prefetch": prefetch}}
    params, plain = _tiny(3, "optimizer+params", **kw), _tiny(3, "optimizer", **kw)
    assert estimate_step(params).breakdown.dp_comm >= estimate_step(plain).breakdown.dp_comm


@pytest.mark.parametrize(("zero", "offload", "prefetch"), [
    (1, "optimizer", True), (2, "optimizer", True), (3, "optimizer", True),
    (3, "optimizer+params", True), (3, "optimizer+params", False)])
def test_both_engines_agree_on_offload(zero: int, offload: str, prefetch: bool) -> None:
    s = _compute_bound(zero, offload, prefetch)
    des, ana = simulate_step(s), estimate_step(s)
    assert des.iteration_time_s == pytest.approx(ana.iteration_time_s, rel=1e-12)
    for key, value in ana.breakdown.as_dict().items():
        assert des.breakdown.as_dict()[key] == pytest.approx(value, rel=1e-9, abs=1e-15), key
    plain = estimate_step(_compute_bound(zero, "none", prefetch))
    assert ana.iteration_time_s > plain.iteration_time_s  # the CPU is slower than the GPU's Adam


@pytest.mark.parametrize("kwargs", [{}, {"pp": 2, "tp": 2}])
def test_both_engines_agree_without_data_parallel_prefetch(kwargs: dict[str, Any]) -> None:
    """Blocking transfers (no prefetch) and pipelines with ZeRO-1 offload: the same step."""
    if kwargs:
        s = tiny(zero_stage=1, offload="optimizer", **kwargs)
    else:
        s = tiny(nodes=1, tp=2, pp=1, batch=4, topology="box-2x3090ti-nvlink", zero_stage=3,
                 offload="optimizer+params", execution={"zero3_prefetch": False})
    des, ana = simulate_step(s), estimate_step(s)
    assert des.breakdown.optimizer == pytest.approx(ana.breakdown.optimizer, rel=1e-12)
    assert des.iteration_time_s == pytest.approx(ana.iteration_time_s, rel=1e-3 if kwargs else 1e-12)


def test_a_scenario_without_the_key_is_unchanged() -> None:
    """No ``offload`` key is ``offload: none``: the same memory and the same step in both engines,
    and no host memory reported."""
    path = "scenarios/seed-10b-boxes.yaml"
    base, explicit = load_scenario(path), load_scenario(path, ["parallelism.offload=none"])
    assert base == explicit
    assert base.parallelism.offload == "none"
    assert repr(estimate_memory(base)) == repr(estimate_memory(explicit))
    assert estimate_memory(base).host_bytes == 0.0
    s = tiny()
    assert estimate_step(s) == estimate_step(dataclasses.replace(
        s, parallelism=dataclasses.replace(s.parallelism, offload="none")))


# The sweep axis ----------------------------------------------------------------------------------

TINY_SWEEP: dict[str, Any] = {
    "model": {"name": "tiny", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1024,
              "seq_len": 256},
    "cluster": {"topology": "box-4x3090ti-nvlink", "nodes": 1},
    "parallelism": {"global_batch": 8},
}


def _layouts(axes: SearchAxes) -> list[Any]:
    return list(layouts(load_scenario(TINY_SWEEP), axes, Rejections()))


def test_the_sweep_keeps_the_optimizer_on_the_gpu_unless_the_search_names_offload() -> None:
    assert "offload" in LAYOUT_KEYS
    default = _layouts(SearchAxes(values={"zero_stage": (1, 3)}))
    assert {p.offload for p in default} == {"none"}
    axes = axes_from(None, ["offload=none,optimizer,optimizer+params", "zero_stage=1,3"], "")
    searched = _layouts(axes)
    assert {p.offload for p in searched} == {"none", "optimizer", "optimizer+params"}
    assert all(p.zero_stage == 3 for p in searched if p.offload == "optimizer+params")
    # every GPU-only layout is still there, and each offloaded one is a valid GPU-only layout too
    plain = {dataclasses.replace(p, offload="none") for p in searched}
    assert plain == set(default)
    with pytest.raises(SpecError, match="offload: 'nvme' is not one of none, optimizer"):
        axes_from({"offload": ["nvme"]}, [], "x.yaml")


def test_the_sweep_times_offloaded_layouts_and_counts_rule_rows() -> None:
    axes = axes_from(None, ["offload=optimizer+params", "zero_stage=1,3", "recompute=none",
                            "micro_batch=1"], "")
    task = AnalyticalTask(TINY_SWEEP, (), (Setting("", ()),), axes)
    base = task.base(0)
    rows = []
    for i, split in enumerate(splits(base, axes, Rejections())):
        rows += task(Chunk(i, ((0, tuple(split.items())),)))
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok
    assert all(r["offload"] == "optimizer+params" and r["zero_stage"] == 3 for r in ok)
    zero1 = [r for r in rows if r["zero_stage"] == 1]
    assert zero1
    assert all(r["status"] == "rule" for r in zero1)
    assert any(r["reason"].startswith("parallelism.offload: optimizer+params needs zero_stage 3")
               for r in zero1)


def test_reliability_warns_when_the_host_cannot_hold_the_offloaded_state() -> None:
    """`simcluster reliability` says the layout does not fit and why: the host's memory, with the
    file and key (cli_reliability.memory_warnings); a host that holds it gives no warning."""
    from simcluster.cli_reliability import memory_warnings

    path = "scenarios/seed-10b-boxes.yaml"
    small = load_scenario(path, ["parallelism.offload=optimizer", "cluster.topology.host.memory_GiB=4"])
    (warning,) = memory_warnings(small)
    memory = estimate_memory(small)
    reason = host_refusal(memory.host_bytes, memory.host_capacity_bytes, small.cluster.topology)
    assert warning == (f"the layout does not fit: {reason}; the step time and everything above "
                       "assume it ran")
    assert memory_warnings(load_scenario(path, ["parallelism.offload=optimizer",
                                                "cluster.topology.host.memory_GiB=64"])) == []


def test_the_shard_spans_data_and_context_parallel_ranks() -> None:
    """ZeRO shards over dp x cp (Megatron's distributed optimizer shards over the data-parallel
    group with context parallelism, as perf.memory does): 8 GPUs at cp = 2 give dp = 4 and a
    shard of 1/8 of the dense parameters, and of the experts (ep = 1)."""
    s = _tiny(1, "optimizer", cp=2)
    assert (s.parallelism.dp, s.parallelism.cp) == (4, 2)
    assert shard_params(s, 800.0) == pytest.approx(100.0)
    assert shard_params(s, 800.0, 400.0) == pytest.approx(100.0 + 50.0)
