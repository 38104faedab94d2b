"""Communication groups placed on a topology: who talks to whom, over what, at what rate.

:func:`comm_group` places ``size`` ranks ``base + i*stride`` on the node-major numbering of a
:class:`~simcluster.spec.hardware.TopologySpec` (``gpu = node*gpus_per_node + local``) and works out
what the Tier A formulas need: ranks, nodes spanned, members per node and the per-rank effective
bandwidth and latency inside and between nodes. It is analytical on the spec (no topology graph).

Sharing assumptions (docs/collectives.md, "Placement"; a flat ring's ceiling of ``min(NVLink, NICs x
NIC rate)`` is also SimAI's, aliyun/SimAI @cef83f9 ``astra-sim-alibabacloud/astra-sim/system/calbusbw.cc``):

* ``gpus_per_node / g`` congruent groups run at once, so a group with ``g`` members per node owns
  ``g`` of the node's ``gpus_per_node`` NIC shares (``nics_per_node * nic_Bps / gpus_per_node``
  each); a flat ring crosses each node boundary through those ``g`` shares.
* An NVLink domain (``nvl-domain``) counts as one node for the scale-up layer.
* PCIe-only boxes (and ``nvlink-bridge`` groups that leave a bridge) move data through the CPU: the
  members behind one PCIe switch share its x16 uplink, and a group that spans CPU sockets is also
  capped by the inter-socket link. Only a group inside one bridge set uses the NVLink bridge.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from simcluster.errors import SpecError
from simcluster.perf.cache import Keyed, keyed_fabric, memoised
from simcluster.perf.collectives_calibration import LinkCost, match_class
from simcluster.spec.hardware import TopologySpec


@dataclass(frozen=True, slots=True)
class CommGroup:
    """A group of ranks on a topology with the numbers the collective formulas need.

    Attributes
    ----------
    n : int
        Ranks in the group.
    nodes : int
        Nodes (scale-up domains) the group spans, N.
    ranks_per_node : int
        Group members per spanned node, g (the smallest count when uneven).
    intra : LinkCost | None
        Per-rank effective numbers inside a node; ``None`` when ``g == 1``.
    inter : LinkCost | None
        Per-rank effective numbers between nodes (one NIC share per rank); ``None`` on one node.
    """

    n: int
    nodes: int
    ranks_per_node: int
    intra: LinkCost | None
    inter: LinkCost | None

    @property
    def ranks(self) -> int:
        """Alias of ``n``: ranks in the group."""
        return self.n

    @property
    def nvls(self) -> bool:
        """NVLink SHARP is usable: one switch domain whose calibration has an NVLS line."""
        return self.nodes == 1 and self.intra is not None and self.intra.nvls is not None


def domain_size(topo: TopologySpec) -> int:
    """GPUs sharing one scale-up fabric: the NVLink domain for ``nvl-domain``, else the node."""
    up = topo.scale_up
    return up.domain_gpus if up.kind == "nvl-domain" else topo.gpus_per_node


def group_ranks(size: int, stride: int) -> list[int]:
    """Global ranks ``i*stride`` of the group with base 0 (congruent groups cost the same)."""
    if size < 1:
        raise SpecError("group.size", f"must be >= 1, got {size}")
    if stride < 1:
        raise SpecError("group.stride", f"must be >= 1, got {stride}")
    return [i * stride for i in range(size)]


def nic_share_Bps(topo: TopologySpec) -> float:
    """One GPU's share of its node's NICs: ``nics_per_node * nic_Bps / gpus_per_node``."""
    out = topo.scale_out
    return out.nics_per_node * out.nic_Bps / topo.gpus_per_node


def _bridged(topo: TopologySpec, local: list[int]) -> bool:
    """All ``local`` GPU indices sit on one NVLink bridge set."""
    return len({gpu // topo.scale_up.bridge_gpus for gpu in local}) == 1


def pcie_path_Bps(topo: TopologySpec, local: list[int]) -> float:
    """Per-rank line rate through PCIe and the CPU for GPUs ``local`` of one node.

    Each member's traffic crosses its PCIe switch uplink, shared by the members behind that switch;
    a group that spans sockets is also bounded by the inter-socket link (one ring flow per
    direction crosses it).
    """
    host = topo.host
    per_switch = Counter(gpu // host.gpus_per_pcie_switch for gpu in local)
    rate = host.pcie_Bps / max(per_switch.values())
    per_socket = max(1, topo.gpus_per_node // host.cpu_sockets)
    if len({gpu // per_socket for gpu in local}) > 1:
        rate = min(rate, host.inter_socket_Bps)
    return rate


def intra_cost(topo: TopologySpec, local: list[int]) -> LinkCost:
    """Effective intra-node numbers for the group members ``local`` (local GPU indices)."""
    up = topo.scale_up
    if up.kind in ("nvswitch", "nvl-domain"):
        return match_class("scale_up", up.kind, up.bandwidth_Bps).at(up.bandwidth_Bps, up.nvls,
                                                                     up.latency_s)
    if up.kind == "nvlink-bridge" and _bridged(topo, local):
        return match_class("scale_up", up.kind, up.bandwidth_Bps).at(up.bandwidth_Bps, False,
                                                                     up.latency_s)
    line = pcie_path_Bps(topo, local)
    latency = up.latency_s if up.kind == "pcie" else None  # a bridge's latency is not PCIe's
    return match_class("scale_up", "pcie", topo.host.pcie_Bps).at(line, False, latency)


def inter_cost(topo: TopologySpec) -> LinkCost:
    """Effective inter-node numbers per rank (one NIC share each)."""
    if topo.scale_out.nics_per_node < 1:
        raise SpecError("scale_out.nics_per_node", "a group spanning nodes needs at least one NIC")
    return match_class("scale_out", "nic", topo.scale_out.nic_Bps).at(
        nic_share_Bps(topo), False, topo.scale_out.latency_s)


def comm_group(topo: TopologySpec, size: int, stride: int) -> CommGroup:
    """Place a group of ``size`` ranks ``base + i*stride`` on ``topo``.

    Parameters
    ----------
    topo : TopologySpec
        The cluster design (node-major GPU numbering).
    size : int
        Ranks in the group (TP, DP, ... degree).
    stride : int
        Distance between consecutive members' global ranks (Megatron TP: 1; DP: ``tp*cp``).

    Returns
    -------
    CommGroup
        Its shape and per-rank effective bandwidth/latency numbers.
    """
    if size < 1 or stride < 1:
        group_ranks(size, stride)  # raises the SpecError naming the bad value
    return _placed(keyed_fabric(topo), size, stride)


@memoised()
def _placed(fabric: Keyed[TopologySpec], size: int, stride: int) -> CommGroup:
    """:func:`comm_group` on the fabric of ``fabric.value`` (cached: sweeps place the same groups)."""
    topo = fabric.value
    dom = domain_size(topo)
    first = [i * stride for i in range(min(size, -(-dom // stride)))]  # the ranks of domain 0
    domains, per_node = domain_counts(size, stride, dom)
    intra = intra_cost(topo, [g % topo.gpus_per_node for g in first]) if len(first) > 1 else None
    inter = inter_cost(topo) if domains > 1 else None
    return CommGroup(size, domains, per_node, intra, inter)


def domain_counts(size: int, stride: int, dom: int) -> tuple[int, int]:
    """Domains the ranks ``i*stride`` (``i < size``) fall in, and the fewest ranks of any of them.

    Closed form (a group of 2**70 ranks is not listed): with ``stride < dom`` no domain is skipped,
    and the count of a full domain ``d`` depends on ``d*dom mod stride`` only, which repeats every
    ``stride / gcd(stride, dom)`` domains; the last domain may be partial.
    """
    if stride >= dom:
        return size, 1
    last = (size - 1) * stride // dom

    def count(d: int) -> int:
        return min(size, -(-(d + 1) * dom // stride)) - -(-d * dom // stride)

    period = stride // math.gcd(stride, dom)
    return last + 1, min(count(d) for d in (*range(min(last + 1, period)), last))
