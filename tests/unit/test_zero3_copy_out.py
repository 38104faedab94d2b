"""FSDP2's copies (``execution.zero3_copy_out``): the all-gather copy-out, one read and one write
of a layer's unsharded 16-bit parameters on the compute stream before its forward and before its
backward (pytorch/pytorch#117950, #117203), and the reduce-scatter copy-in after its backward, one
read of the 16-bit gradients and one write in the fp32 reduce dtype, which the compute stream waits
for (pytorch/pytorch@01d66d21 ``foreach_reduce_scatter``). Oracle: Llama 2 13B's layer parameters
counted by hand from its shape (Touvron et al. 2023: hidden 5120, FFN 13824, 40 heads) at the A100
80GB's measured HBM rate (2039 GB/s x 0.79, docs/catalog.md)."""

from __future__ import annotations

import pytest

from simcluster.perf.stage_work import scenario_layer_times
from simcluster.perf.zero3 import copy_in_bytes, copy_out_bytes
from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario
from tests.validation.torchtitan import LLAMA2_13B

ENGINES = ["analytical", "des"]


def _scenario(copy_out: bool, zero: int = 3, nodes: int = 8) -> Scenario:
    return load_scenario({
        "name": "fsdp", "model": LLAMA2_13B, "precision": "bf16",
        "execution": {"stack": "fsdp2-eager", "zero3_copy_out": copy_out},
        "cluster": {"topology": "dgx-a100-80gb", "nodes": nodes},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": 8 * nodes * 2, "micro_batch": 2,
                        "zero_stage": zero}})


def test_copy_out_moves_the_layer_parameters_twice() -> None:
    h, f, vocab, layers = 5120, 13824, 32000, 40
    layer = 4 * h * h + 3 * h * f + 2 * h  # q, k, v, o; gate, up, down; two RMSNorm weights
    # the embedding, output layer and final norm spread over the layers, as ZeRO-3's gathers are
    layer += (2 * vocab * h + h) / layers
    expected_bytes = 2 * layer * 2  # read + write, bf16
    assert copy_out_bytes(_scenario(True)) == pytest.approx(expected_bytes, rel=1e-9)
    copy_in = layer * (2 + 4)  # bf16 gradients read, fp32 reduce-scatter input written
    assert copy_in_bytes(_scenario(True)) == pytest.approx(copy_in, rel=1e-9)
    seconds = expected_bytes / (2039e9 * 0.79)  # 0.81 ms
    on, off = scenario_layer_times(_scenario(True)), scenario_layer_times(_scenario(False))
    assert on.forward_s - off.forward_s == pytest.approx(seconds, rel=1e-9)
    assert on.backward_s - off.backward_s == pytest.approx(
        seconds + copy_in / (2039e9 * 0.79), rel=1e-9)  # 0.81 + 1.21 ms
    assert on.recompute_s == off.recompute_s  # the recompute reuses the gathered parameters


def test_no_copy_out_without_a_zero3_gather() -> None:
    assert copy_out_bytes(_scenario(True, zero=1)) == 0.0
    assert copy_out_bytes(_scenario(False)) == 0.0
    assert copy_in_bytes(_scenario(True, zero=1)) == 0.0
    assert copy_in_bytes(_scenario(False)) == 0.0
    one_rank = load_scenario({
        "name": "fsdp-1", "model": LLAMA2_13B, "precision": "bf16",
        "execution": {"stack": "fsdp2-eager"}, "cluster": {"topology": "dgx-a100-80gb", "nodes": 1},
        "parallelism": {"tp": 8, "pp": 1, "global_batch": 2, "micro_batch": 2, "zero_stage": 3}})
    assert one_rank.parallelism.dp == 1
    assert copy_out_bytes(one_rank) == 0.0


@pytest.mark.parametrize("engine", ENGINES)
def test_both_engines_pay_the_copy_out(engine: str) -> None:
    on = simulate(_scenario(True), engine=engine).step.iteration_time_s
    off = simulate(_scenario(False), engine=engine).step.iteration_time_s
    assert on > off
