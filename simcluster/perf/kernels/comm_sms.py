"""What a collective takes from the compute running beside it: SMs and HBM bandwidth.

A NCCL collective is one CUDA kernel with one thread block (CTA) per channel (NCCL's
``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``; RCCL's documentation calls them "CTAs (channels)"), each
resident on one SM for the kernel's whole run. A compute kernel launched beside it runs on the SMs
left: while ``c`` of the GPU's ``S`` SMs hold a collective, compute progresses at ``(S - c) / S``
of its rate. Compute needing ``W`` seconds alone that overlaps collectives during ``O`` seconds of
its wall time therefore ends after ``W + O * c / S`` (``W = (T - O) + O (S - c) / S``).

``c`` is NCCL's channel count unless ``execution.comm_sms`` gives it: NCCL builds its rings over the
node's NICs, two channels each (:data:`CHANNELS_PER_NIC`), so a DGX node's collectives hold 16 SMs
(15% of an A100's 108) and a one-NIC consumer box's 2 (2.4% of an RTX 3090 Ti's 84). A data-parallel
group inside one node rings over NVLink on :data:`INTRA_NODE_CHANNELS` (24) channels.

The collective also moves its data through HBM: every byte it receives over a link is written to
memory and read back to be sent or reduced, so its HBM traffic is at least twice its link traffic
(:data:`HBM_BYTES_PER_LINK_BYTE`; NCCL's maintainer, NVIDIA/nccl#1428: "300GB/s needs to be
multiplied by at least 2x for memory bandwidth, as we need to store to memory, then read back from
it"). The memory-bound kernels beside it get the rest of the achieved bandwidth. Over one layer's
operators (:func:`overlap_share`): GEMMs and attention run on ``S - c`` SMs, memory-bound kernels
at ``1 - 2 busbw / bandwidth`` of their speed, so the layer slows by ``slow`` and compute
overlapped during ``O`` seconds ends ``O (1 - 1/slow)`` later (``c / S`` without HBM traffic). On an
8x H100 node (24 CTAs, ~350 GB/s bus bandwidth) that is ~1.22x for GEMMs and ~1.3x for the
element-wise kernels; the published measurements are 18.9% on average and up to 40% (Lee et al.,
arXiv 2507.03114, 4x A100/H100/MI250/MI210) and "30-40% slower" matmuls under FSDP's collectives
on 8x H100 (pytorch/pytorch#179937); a GEMM sized to one full wave of 132 blocks can lose up to
half (NVIDIA developer forum thread 337991), a tail effect not modelled here.

Both engines charge it the same way: the analytical engine to the communication it hides behind
compute (:mod:`.step`), the discrete-event engine to the overlap it observes op by op
(:mod:`simcluster.sim.device`). Stated simplifications: one collective's ``c`` whatever the group
(NCCL picks its channel count per communicator), and at most one collective's SMs at a time (two
collectives in flight on one GPU share its links in this model, so their overlap is counted once);
the L2 the collective uses and the tail of one-wave GEMMs are not counted.
"""

from __future__ import annotations

from typing import Final

from simcluster.perf.cache import memoised
from simcluster.perf.collectives import CommGroup, collective_time
from simcluster.perf.kernels.elementwise import achieved_bandwidth_Bps
from simcluster.perf.kernels.operator import LayerTimes
from simcluster.spec.scenario import Scenario

#: NCCL channels per NIC of a node, from NCCL's own logs of multi-node rings: two A800 nodes with
#: one RoCE NIC each run 2 ("Channel 00/02", NVIDIA/nccl-tests#133), 8-NIC H100 nodes 16
#: ("Channel 05/16", NVIDIA/nccl#1453).
CHANNELS_PER_NIC = 2
#: Bounds: a node without a NIC counts as one NIC's channels (single-node groups; stated
#: simplification); NCCL 2.x allocates at most MAXCHANNELS = 32 (src/include/devcomm.h).
MIN_CHANNELS, MAX_CHANNELS = CHANNELS_PER_NIC, 32
#: NCCL's ring channels inside one node: "24 coll channels" in NCCL's log on a single 8x H100 node
#: (aws-samples/aws-do-eks@701c554a Container-Root/eks/deployment/nccl-test/README.md, AWS
#: p5.48xlarge; 16 on two nodes), "Channel 23/24" on an HGX A100 (NVIDIA/nccl-tests#100), and "24
#: would have been the number of channels needed for intra-node bandwidth" (NVIDIA/nccl#652).
INTRA_NODE_CHANNELS: Final = 24
#: HBM bytes a collective moves per byte on its links (module docstring; nccl#1428: "at least 2x").
HBM_BYTES_PER_LINK_BYTE: Final = 2.0
#: The bus bandwidth of a collective this large is the group's plateau (nccl-tests saturate at
#: >= 512 MiB on one node, >= 1 GiB across nodes: calibration notes in docs/collectives.md).
PLATEAU_BYTES: Final = 2**30
#: Memory-bound kernels keep at least this share of the bandwidth (a floor for absurd inputs).
MIN_HBM_SHARE: Final = 0.1


def comm_sms(s: Scenario, intra_node: bool = False) -> int:
    """SMs one DP or ZeRO collective holds: ``execution.comm_sms``, or NCCL's channel count:
    :data:`INTRA_NODE_CHANNELS` for a group inside one node (``intra_node``), else
    :data:`CHANNELS_PER_NIC` per NIC of the node, within ``[MIN_CHANNELS, MAX_CHANNELS]``."""
    given = s.execution.comm_sms
    if given is not None:
        return given
    if intra_node:
        return INTRA_NODE_CHANNELS
    nics = s.cluster.topology.scale_out.nics_per_node
    return min(max(CHANNELS_PER_NIC * nics, MIN_CHANNELS), MAX_CHANNELS)


def comm_sm_share(s: Scenario, intra_node: bool = False) -> float:
    """:func:`comm_sms` over ``accelerator.sms`` (at most 1); 0 when the SM count is unknown."""
    sms = s.cluster.topology.accelerator.sms
    if sms <= 0:
        return 0.0
    return min(comm_sms(s, intra_node), sms) / sms


def hbm_share(s: Scenario, dp: CommGroup | None) -> float:
    """Share of the achieved HBM bandwidth the data-parallel collective on ``dp`` leaves the
    memory-bound kernels beside it: ``1 - HBM_BYTES_PER_LINK_BYTE x busbw / bandwidth`` (1
    without a DP group)."""
    if dp is None:
        return 1.0
    busbw = collective_time("reduce_scatter", PLATEAU_BYTES, dp).busbw_Bps
    acc = s.cluster.topology.accelerator
    used = HBM_BYTES_PER_LINK_BYTE * busbw / achieved_bandwidth_Bps(acc)
    return max(MIN_HBM_SHARE, 1.0 - used)


def overlap_share(s: Scenario, dp: CommGroup | None, layer: LayerTimes) -> float:
    """Extra compute seconds per second of DP or ZeRO collective on ``dp`` beside it (module
    docstring): ``1 - 1/slow``, ``slow`` the layer's forward and backward on the SMs and the HBM
    bandwidth the collective leaves; ``comm_sm_share`` when the layer has no memory-bound kernel;
    0 when ``execution.comm_sms`` is 0 (the collectives stated to take nothing), and without a
    DP group (nothing but the host copies of ``parallelism.offload`` can run beside compute, on
    the copy engines)."""
    if s.execution.comm_sms == 0 or dp is None:  # stated: they take nothing; or none runs
        return 0.0
    intra = dp is not None and dp.nodes == 1
    return _overlap_share(comm_sm_share(s, intra), hbm_share(s, dp),
                          *_compute_and_memory_s(layer))


@memoised()
def _overlap_share(sm_share: float, hbm: float, compute_s: float, memory_s: float) -> float:
    total = compute_s + memory_s
    if total <= 0.0 or sm_share >= 1.0:
        return sm_share
    slow = (compute_s / (1.0 - sm_share) + memory_s / hbm) / total
    return 1.0 - 1.0 / slow


def _compute_and_memory_s(layer: LayerTimes) -> tuple[float, float]:
    """(GEMM and attention, memory-bound) seconds of a layer's forward and backward."""
    memory = sum(o.time_s + o.backward_s for o in layer.operators if o.kind == "memory")
    return layer.forward_s + layer.backward_s - memory, memory


def contention_s(share: float, overlap_s: float) -> float:
    """Extra compute seconds from ``overlap_s`` seconds of collectives beside compute."""
    return share * max(overlap_s, 0.0)
