"""The SMs a collective takes from the compute running beside it.

A NCCL collective is one CUDA kernel with one thread block (CTA) per channel (NCCL's
``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``; RCCL's documentation calls them "CTAs (channels)"), each
resident on one SM for the kernel's whole run. A compute kernel launched beside it runs on the SMs
left: while ``c`` of the GPU's ``S`` SMs hold a collective, compute progresses at ``(S - c) / S``
of its rate. Compute needing ``W`` seconds alone that overlaps collectives during ``O`` seconds of
its wall time therefore ends after ``W + O * c / S`` (``W = (T - O) + O (S - c) / S``).

``c`` is NCCL's channel count unless ``execution.comm_sms`` gives it: NCCL builds its rings over the
node's NICs, two channels each (:data:`CHANNELS_PER_NIC`), so a DGX node's collectives hold 16 SMs
(15% of an A100's 108) and a one-NIC consumer box's 2 (2.4% of an RTX 3090 Ti's 84).

Both engines charge it the same way: the analytical engine to the communication it hides behind
compute (:mod:`.step`), the discrete-event engine to the overlap it observes op by op
(:mod:`simcluster.sim.device`). Stated simplifications: one collective's ``c`` whatever the group
(NCCL picks its channel count per communicator), and at most one collective's SMs at a time (two
collectives in flight on one GPU share its links in this model, so their overlap is counted once);
the HBM bandwidth and L2 the collective also uses are not counted.
"""

from __future__ import annotations

from simcluster.spec.scenario import Scenario

#: NCCL channels per NIC of a node, from NCCL's own logs of multi-node rings: two A800 nodes with
#: one RoCE NIC each run 2 ("Channel 00/02", NVIDIA/nccl-tests#133), 8-NIC H100 nodes 16
#: ("Channel 05/16", NVIDIA/nccl#1453).
CHANNELS_PER_NIC = 2
#: Bounds: a node without a NIC counts as one NIC's channels (single-node groups; stated
#: simplification); NCCL 2.x allocates at most MAXCHANNELS = 32 (src/include/devcomm.h).
MIN_CHANNELS, MAX_CHANNELS = CHANNELS_PER_NIC, 32


def comm_sms(s: Scenario) -> int:
    """SMs one DP or ZeRO collective holds: ``execution.comm_sms``, or NCCL's channel count for
    the node (:data:`CHANNELS_PER_NIC` per NIC, within ``[MIN_CHANNELS, MAX_CHANNELS]``)."""
    given = s.execution.comm_sms
    if given is not None:
        return given
    nics = s.cluster.topology.scale_out.nics_per_node
    return min(max(CHANNELS_PER_NIC * nics, MIN_CHANNELS), MAX_CHANNELS)


def comm_sm_share(s: Scenario) -> float:
    """:func:`comm_sms` over ``accelerator.sms`` (at most 1); 0 when the SM count is unknown."""
    sms = s.cluster.topology.accelerator.sms
    if sms <= 0:
        return 0.0
    return min(comm_sms(s), sms) / sms


def contention_s(share: float, overlap_s: float) -> float:
    """Extra compute seconds from ``overlap_s`` seconds of collectives beside compute."""
    return share * max(overlap_s, 0.0)
