"""Blackwell and Blackwell Ultra presets (issue 23): b300, gb300, dgx-b300, gb300-nvl72.

The oracles are the vendor figures the catalog comments cite, recomputed here from the published
per-system numbers (dense = sparse / 2 where NVIDIA quotes sparsity):

* HGX B300 (https://www.nvidia.com/en-us/data-center/hgx/), per 8 GPUs: FP8 72, FP16/BF16 36,
  TF32 18 PFLOPS with sparsity; FP32 600 TFLOPS; dense FP4 13.5 PF per GPU (PrimeIntellect-ai/
  prime-rl PR #3168); HGX B200: FP4 144 PFLOPS sparse, 72 dense.
* GB300 NVL72 (https://www.nvidia.com/en-us/data-center/gb300-nvl72/), per 72 GPUs: FP4 1,080
  PFLOPS dense; FP8 720, FP16/BF16 360, TF32 180 PFLOPS with sparsity; 576 TB/s HBM3e; GB200
  NVL72: FP4 1,440 PFLOPS with sparsity.
* NVIDIA Technical Blog "Inside NVIDIA Blackwell Ultra" (2025-08): 288 GB HBM3e and 8 TB/s per
  GPU; dense NVFP4 1.5x Blackwell's. Hot Chips 2025 (Tom's Hardware): GPU TDP 1,400 W (GB300),
  FP32 0.083 PF.
"""

from __future__ import annotations

import math

import pytest

from simcluster import catalog
from simcluster.cli import main
from simcluster.perf.collectives import comm_group
from simcluster.perf.collectives_group import nic_share_Bps
from simcluster.perf.kernels.gemm import best_matmul_flops_per_s
from simcluster.perf.step import estimate_step
from simcluster.spec import load_scenario, load_topology, schema
from simcluster.spec.hardware import AcceleratorSpec

TERA = 1e12
GB = 1e9

#: Dense peaks, TFLOP/s per GPU, from the system figures above.
PEAKS = {
    "b300": {"fp32": 600 / 8, "tf32": 18e3 / 8 / 2, "fp16": 36e3 / 8 / 2, "bf16": 36e3 / 8 / 2,
             "fp8": 72e3 / 8 / 2, "fp4": 13.5e3},
    "gb300": {"fp32": 83.3, "tf32": 180e3 / 72 / 2, "fp16": 360e3 / 72 / 2,
              "bf16": 360e3 / 72 / 2, "fp8": 720e3 / 72 / 2, "fp4": 1080e3 / 72},
}
#: Dense FP4 of the Blackwell parts the catalog now carries (HGX B200 72 PFLOPS dense / 8 GPUs;
#: GB200 NVL72 1,440 PFLOPS sparse / 72 / 2).
FP4_BLACKWELL = {"b200": 72e3 / 8, "gb200": 1440e3 / 72 / 2}
#: The Blackwell part each Blackwell Ultra part succeeds (same board, same NVLink 5 fabric).
PREDECESSOR = {"b300": "b200", "gb300": "gb200"}
#: memory (GB), bandwidth (GB/s), TDP (W), SMs (the CUDA-reported count; 160 is the full die pair).
SPECS = {
    "b300": (288, 8000, 1100, 148),
    "gb300": (288, 576e3 / 72, 1400, 152),
    "b200": (180, 8000, 1000, 148),
    "gb200": (186, 8000, 1200, 152),
}


def _accelerator(name: str) -> AcceleratorSpec:
    return schema.parse(AcceleratorSpec, catalog.entry("accelerators", name))


@pytest.mark.parametrize("name", sorted(PEAKS))
def test_peaks_are_the_vendor_figures(name: str) -> None:
    acc = _accelerator(name)
    assert set(acc.peak_flops_per_s) == set(PEAKS[name])
    for dtype, tflops in PEAKS[name].items():
        assert acc.peak(dtype) == pytest.approx(tflops * TERA, rel=1e-9), dtype


@pytest.mark.parametrize("name", sorted(SPECS))
def test_memory_power_and_sms(name: str) -> None:
    acc = _accelerator(name)
    memory_GB, bandwidth_GBps, tdp_W, sms = SPECS[name]
    assert acc.memory_bytes == memory_GB * 2**30  # the catalog's "GiB" is the vendor's "GB" figure
    assert acc.memory_bandwidth_Bps == pytest.approx(bandwidth_GBps * GB)
    assert (acc.tdp_W, acc.sms, acc.arch) == (tdp_W, sms, "blackwell")
    if acc.gemm_tiles is not None:  # the loader refuses a mismatch; kept explicit here
        assert acc.gemm_tiles.sms == acc.sms


@pytest.mark.parametrize("name", sorted(FP4_BLACKWELL))
def test_blackwell_fp4_peak(name: str) -> None:
    assert _accelerator(name).peak("fp4") == pytest.approx(FP4_BLACKWELL[name] * TERA)


@pytest.mark.parametrize("name", sorted(PREDECESSOR))
def test_ultra_raises_fp4_by_half_and_keeps_fp8_and_bf16(name: str) -> None:
    ultra, base = _accelerator(name), _accelerator(PREDECESSOR[name])
    assert ultra.peak("fp4") == pytest.approx(1.5 * base.peak("fp4"))
    for dtype in ("fp8", "bf16", "fp16", "tf32"):
        assert ultra.peak(dtype) == base.peak(dtype), dtype
    # with no Blackwell Ultra GEMM measurement the levels are the predecessor's (an estimate)
    assert ultra.matmul_efficiency == base.matmul_efficiency
    assert best_matmul_flops_per_s(ultra, "fp4") > best_matmul_flops_per_s(base, "fp4")
    assert ultra.memory_bytes > base.memory_bytes


def test_topology_files_load() -> None:
    b300, nvl = load_topology("dgx-b300"), load_topology("gb300-nvl72")
    assert (b300.accelerator.name, b300.gpus_per_node, b300.scale_up.kind) == ("b300", 8, "nvswitch")
    assert (nvl.accelerator.name, nvl.gpus_per_node, nvl.scale_up.kind) == ("gb300", 4,
                                                                           "nvl-domain")
    for topo in (b300, nvl):
        assert topo.scale_up.bandwidth_Bps == 900 * GB  # NVLink 5: 1.8 TB/s both directions
        assert topo.scale_up.nvls
        assert topo.scale_out.nic_Bps == 100 * GB  # ConnectX-8: 800 Gb/s
        assert topo.scale_out.nics_per_node == topo.gpus_per_node  # one NIC per GPU
        # PCIe Gen6 feeds the 800 Gb/s NIC at its line rate (a PCIe 5.0 link would cap it at 64 GB/s)
        assert nic_share_Bps(topo) == 100 * GB


def test_nvl72_domain_holds_72_gpus() -> None:
    """TP and EP groups up to 72 ranks stay on NVLink (one scale-up domain, NVLS), as on the
    GB200 NVL72 (tests/unit/test_collectives.py); the 73rd rank crosses a NIC."""
    topo = load_topology("gb300-nvl72")
    assert topo.scale_up.domain_gpus == 72
    for size, stride in ((72, 1), (32, 1), (8, 9), (18, 4)):  # TP 72, TP 32, strided EP groups
        g = comm_group(topo, size, stride)
        assert (g.nodes, g.nvls, g.inter) == (1, True, None), (size, stride)
        assert g.intra is not None
        assert g.intra.line_Bps == 900 * GB
    for size, stride in ((144, 1), (2, 72)):
        g = comm_group(topo, size, stride)
        assert g.nodes == 2
        assert g.inter is not None
        assert g.inter.line_Bps == 100 * GB


def test_dgx_b300_node_is_the_nvlink_domain() -> None:
    topo = load_topology("dgx-b300")
    assert comm_group(topo, 8, 1).inter is None
    across = comm_group(topo, 16, 1)
    assert across.nodes == 2
    assert across.inter is not None


def _fp8_scenario(topology: str, nodes: int, tp: int, pp: int, global_batch: int) -> dict:
    return {"name": f"fp8-{topology}", "model": "llama-3-8b", "precision": "fp8",
            "cluster": {"topology": topology, "nodes": nodes},
            "parallelism": {"tp": tp, "pp": pp, "micro_batch": 1, "global_batch": global_batch,
                            "sequence_parallel": True, "recompute": "selective",
                            "zero_stage": 1}}


@pytest.mark.parametrize(("ultra", "base", "nodes", "tp", "pp", "batch"), [
    ("dgx-b300", "dgx-b200", 2, 2, 2, 256),
    ("gb300-nvl72", "gb200-nvl72", 18, 8, 1, 288),
])
def test_fp8_step_is_finite_and_not_slower(ultra: str, base: str, nodes: int, tp: int, pp: int,
                                           batch: int) -> None:
    """The same fp8 workload: Blackwell Ultra's fp8 peak equals Blackwell's, so its step is not
    slower (more memory, faster NICs on dgx-b300) and in the same range."""
    t_ultra = estimate_step(load_scenario(_fp8_scenario(ultra, nodes, tp, pp, batch)))
    t_base = estimate_step(load_scenario(_fp8_scenario(base, nodes, tp, pp, batch)))
    assert math.isfinite(t_ultra.iteration_time_s)
    assert t_ultra.iteration_time_s > 0
    assert t_ultra.iteration_time_s <= t_base.iteration_time_s * (1 + 1e-9)
    assert t_ultra.iteration_time_s > 0.8 * t_base.iteration_time_s


def test_unknown_sm_count_still_takes_nothing() -> None:
    """The Blackwell entries now state their SMs; an accelerator given ``sms: 0`` still means
    "unknown" and its collectives take no compute."""
    from simcluster.perf.kernels.comm_sms import comm_sm_share
    base = {"name": "b", "model": "llama-3-8b", "precision": "bf16",
            "parallelism": {"tp": 1, "pp": 1, "global_batch": 64, "micro_batch": 4,
                            "zero_stage": 3}}
    cluster = {"topology": {"preset": "dgx-a100-80gb", "accelerator": {"preset": "b300"}},
               "nodes": 2}
    assert comm_sm_share(load_scenario({**base, "cluster": cluster})) > 0
    cluster["topology"]["accelerator"]["sms"] = 0
    assert comm_sm_share(load_scenario({**base, "cluster": cluster})) == 0.0


def test_catalog_lists_the_new_presets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog"]) == 0
    rows = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert {"b300", "gb300", "dgx-b300", "gb300-nvl72"} <= rows
    assert {"b300", "gb300"} <= set(catalog.names("accelerators"))
    assert {"dgx-b300", "gb300-nvl72"} <= set(catalog.names("topologies"))
