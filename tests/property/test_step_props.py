"""Properties of the analytical step: what each breakdown field means, and monotonicity."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from simcluster.perf.step import estimate_step
from simcluster.perf.zero3 import pass_exposed_s
from simcluster.spec import load_scenario


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, Any]:
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    nodes = draw(st.sampled_from([1, 2, 4, 8]))
    if tp * pp > nodes * 8:
        pp = 1
    dp = nodes * 8 // (tp * pp)
    schedule = draw(st.sampled_from(["gpipe", "1f1b", "zb-h1"]))
    return {
        "model": {"preset": "gpt3-7.5b", "layers": 16},
        "cluster": {"topology": draw(st.sampled_from(["dgx-a100-80gb", "dgx-h100"])),
                    "nodes": nodes},
        "parallelism": {"tp": tp, "pp": pp, "global_batch": dp * draw(st.integers(1, 16)),
                        "micro_batch": 1, "schedule": schedule,
                        "recompute": draw(st.sampled_from(["none", "selective", "full"])),
                        "sequence_parallel": tp > 1 and draw(st.booleans())},
    }


# gpt3-7.5b cut to 16 layers: the matmul weights by hand (SC'21 section 3.3: 12h^2 + 13h per
# layer, h = 4096); the tied output layer's V h is left out, so the count is a lower bound.
MATMUL_WEIGHTS = 16 * (12 * 4096**2 + 13 * 4096)
DENSE_PEAK = {"dgx-a100-80gb": 312e12, "dgx-h100": 989.4e12}  # bf16, NVIDIA datasheets


@given(layouts())
def test_each_breakdown_field_means_what_it_says(doc: dict[str, Any]) -> None:
    """Each category against its own meaning, not against the sum that defines the step:
    no pipeline, no bubble and no p2p (a bubble wherever a 1F1B/GPipe pipeline fills); no TP
    collectives without TP; compute at least the weights' 6 FLOPs per token (forward 2,
    backward 4; Kaplan et al. 2020) at the GPU's dense peak, the GPUs sharing the work evenly
    at best."""
    s = load_scenario(doc)
    step = estimate_step(s)
    b, par = step.breakdown, s.parallelism
    assert all(v >= 0 for v in b.as_dict().values())
    assert 0 <= step.bubble_fraction < 1
    assert (b.pp_comm == 0) == (par.pp == 1)
    if par.pp == 1 or par.schedule != "zb-h1":  # zb-h1's W may fill the whole cool-down
        assert (b.bubble == 0) == (par.pp == 1)
    assert (b.tp_comm > 0) == (par.tp > 1)
    tokens = par.global_batch * s.model.seq_len
    gpus = doc["cluster"]["nodes"] * 8
    peak = DENSE_PEAK[doc["cluster"]["topology"]]
    assert b.compute >= 6 * MATMUL_WEIGHTS * tokens / gpus / peak


@given(layouts(), st.sampled_from([1.05, 1.1, 1.2]))
def test_more_bandwidth_never_slows_a_step(doc: dict[str, Any], factor: float) -> None:
    # Within one collective calibration class (collectives.yaml matches the nearest line rate;
    # factors up to 1.2 stay below the geometric midpoint to the next class). Across a class
    # boundary the calibration changes and monotonicity is not guaranteed (see docs/collectives.md).
    base = load_scenario(doc)
    topo = base.cluster.topology
    faster = load_scenario(doc, [
        f"cluster.topology.scale_out.nic_Gbps={topo.scale_out.nic_Bps * 8 / 1e9 * factor}",
        f"cluster.topology.scale_up.bandwidth_GBps={topo.scale_up.bandwidth_Bps / 1e9 * factor}"])
    assert estimate_step(faster).iteration_time_s <= estimate_step(base).iteration_time_s * (1 + 1e-12)


@given(layouts(), st.sampled_from([0.5, 0.8]))
def test_a_slower_gpu_never_speeds_a_step(doc: dict[str, Any], factor: float) -> None:
    base = load_scenario(doc)
    peaks = base.cluster.topology.accelerator.peak_flops_per_s
    slower = load_scenario(doc, [f"cluster.topology.accelerator.peak_TFLOPS.{k}={v / 1e12 * factor}"
                                 for k, v in peaks.items()])
    assert estimate_step(slower).iteration_time_s >= estimate_step(base).iteration_time_s


@given(layouts())
def test_step_is_never_below_the_compute_lower_bound(doc: dict[str, Any]) -> None:
    s = load_scenario(doc)
    step = estimate_step(s)
    slowest = max(st.forward_compute_s + st.backward_compute_s for st in step.stages)
    assert step.iteration_time_s >= s.parallelism.micro_batches * slowest


TIMES = st.floats(0.0, 10.0)


@given(st.integers(1, 64), TIMES, TIMES, TIMES)
def test_zero3_prefetch_never_hurts_and_respects_the_flow_shop_bounds(
        layers: int, before: float, compute: float, after: float) -> None:
    """A ZeRO-3 pass: prefetching exposes no more than blocking collectives, and the pass is never
    shorter than either machine's own work (network: gathers + scatters; GPU: compute)."""
    prefetch = pass_exposed_s(layers, before, compute, after, True)
    blocking = pass_exposed_s(layers, before, compute, after, False)
    assert 0.0 <= prefetch <= blocking * (1 + 1e-12) + 1e-12
    span = layers * compute + prefetch
    assert span >= layers * (before + after) * (1 - 1e-12) - 1e-12
    assert prefetch >= before + after - 1e-12  # the first gather and the last scatter
    assert pass_exposed_s(layers, before, compute * 2, after, True) <= prefetch + 1e-12
