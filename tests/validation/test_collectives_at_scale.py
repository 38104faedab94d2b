"""Large collectives across many H100 nodes: Tier A against published multi-node nccl-tests.

What the gradient reduction and FSDP's gathers cost when they cannot hide is their bus bandwidth
at the job's scale. The DGX H100 preset (8 x 400G per node, rail-optimized) is checked against:

- AWS p5.48xlarge (8x H100, 32 x 100G EFA = 3.2 Tb/s per node, the same per-node bandwidth),
  crazyguitar/aws-gpu-communication-benchmark ``data/nccl_all_gather.csv`` and
  ``data/nccl_all_reduce.csv`` @a77f70db (NCCL 2.27.7, aws-ofi-nccl 1.16.3, nccl-tests 2.16.9,
  one run per point): all-gather of 2 GiB and all-reduce of 8 GiB on 4 to 32 nodes;
- a ring reduce-scatter on H100 from 4 to 128 nodes, NVIDIA/nccl#1229 (the user's plateaus, "360,
  345, 320, 300, 280, 260", message size not stated; a shape, approximate).

The 2-node points are left out: on two nodes NCCL reduces inside each node over NVLink first and
reports more than the NICs carry (477.7 GB/s all-reduce on 400 GB/s of NICs; NVIDIA's advice in
NVIDIA/nccl-tests#290 is NCCL_ALGO=RING to see the network). Tolerance: simcluster within -10% /
+25% of each point (EFA's SRD transport and a single run per point against an InfiniBand model;
today +2% to +24%, the all-gather at 16 nodes the farthest), and its bus bandwidth falls with the
node count as the measurements do.
"""

from __future__ import annotations

import pytest

from simcluster.perf.collectives import collective_time, comm_group
from simcluster.spec import load_topology

pytestmark = pytest.mark.slow

GPUS_PER_NODE = 8
#: (op, bytes, {nodes: published busbw GB/s})
POINTS = [
    ("all_gather", 2 * 2**30, {4: 330.92, 8: 293.71, 16: 265.15, 32: 262.77}),
    ("all_reduce", 8 * 2**30, {4: 356.99, 8: 355.36, 16: 356.27, 32: 321.10}),
]
#: NVIDIA/nccl#1229: ring reduce-scatter plateau by node count (approximate, user's reading).
REDUCE_SCATTER = {4: 360, 8: 345, 16: 320, 32: 300, 64: 280, 128: 260}
LOW, HIGH = 0.90, 1.25


def _busbw(op: str, nbytes: float, nodes: int) -> float:
    topo = load_topology("dgx-h100")
    group = comm_group(topo, nodes * GPUS_PER_NODE, 1)
    return collective_time(op, nbytes, group).busbw_Bps / 1e9


@pytest.mark.parametrize(("op", "nbytes", "measured"), POINTS, ids=[p[0] for p in POINTS])
def test_efa_p5_multinode_bus_bandwidth(op: str, nbytes: int, measured: dict[int, float]) -> None:
    for nodes, published in measured.items():
        ratio = _busbw(op, nbytes, nodes) / published
        assert LOW <= ratio <= HIGH, (op, nodes, ratio)


def test_reduce_scatter_degrades_with_scale_like_rings_do() -> None:
    """From 4 to 128 nodes the published ring reduce-scatter plateau falls 28% (360 to 260);
    simcluster's (4 GiB) falls too, each point within the band."""
    model = {n: _busbw("reduce_scatter", 4 * 2**30, n) for n in REDUCE_SCATTER}
    for nodes, published in REDUCE_SCATTER.items():
        assert LOW <= model[nodes] / published <= HIGH, (nodes, model[nodes])
    assert model[128] < model[32] < model[4]
