"""ZeRO-Offload and ZeRO-Infinity's CPU offload (``parallelism.offload``): what leaves the GPU,
what the host holds, and what the PCIe copies and the CPU's Adam step cost.

Sources: Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC'21
(arXiv 2101.06840); Rajbhandari et al., "ZeRO-Infinity: Breaking the GPU Memory Wall for Extreme
Scale Deep Learning", SC'21 (arXiv 2104.07857); DeepSpeed ``deepspeed/runtime/zero/config.py``
(``offload_optimizer`` valid with ZeRO stages 1-3, ``offload_param`` with stage 3 only).

``optimizer`` (ZeRO-Offload). Each GPU's ZeRO shard of the optimizer lives in host memory: fp32
master weights and Adam's two moments (ZeRO-Offload section 3: the optimizer states and the fp32
parameters on the CPU) and an fp32 gradient partition (DeepSpeed ``stage_1_and_2.py``
``initialize_optimizer_states``: the fp32 partition's ``.grad`` in its dtype on the offload
device, pinned): 16 bytes per parameter of the shard (an fp32 model too: its fp32 weights on the
host are the master). The GPU keeps its 16-bit weights as its ZeRO stage shards them. Under ZeRO-1
it keeps its whole gradient buffer too (stage 1 does not partition gradients: they are reduced at
the step, then the shard copied); under ZeRO-2/3 each micro-batch's reduced gradient shard is
copied to the host and accumulated there (DeepSpeed's config reference, ``round_robin_gradients``:
"more copying between optimizer steps" with gradient accumulation), so none stays on the GPU. A
step then costs, per GPU, on top of the GPU's work:

(a) the gradient shard's copies to the host, once per step under ZeRO-1 and once per micro-batch
    under ZeRO-2/3, each beside the backward of its micro-batch (the copies run on their own
    stream as the gradients are reduced; ZeRO-Offload section 4.1, Figure 5): only what a copy
    outlasts that backward by is exposed, ``copies x max(0, copy - backward)``;
(b) the CPU's Adam over the shards of every GPU of the node, ``gpus_per_node x shard / rate``
    (``host.cpu_adam_params_per_s``; the node's cores serve all its GPUs);
(c) the updated 16-bit shard back to the GPU, after (b) (a ZeRO-1/2 parameter all-gather then
    follows as without offload, :mod:`.param_gather`).

``optimizer+params`` (ZeRO-Infinity, CPU). ZeRO-3 whose 16-bit parameter shards also live in host
memory (2 more bytes per parameter there): before each layer's all-gather every GPU fetches its
shard of the layer over PCIe, and after each layer's reduce-scatter it copies its gradient shard
back (ZeRO-Infinity's bandwidth-centric partitioning, section 6.1: each rank moves ``1/dp`` of a
layer over its own PCIe link, then the ranks all-gather). Both copies are added to ZeRO-3's
per-layer gather and reduce-scatter (:func:`simcluster.perf.zero3.zero3_layer`), so the same
prefetch flow shop hides them behind the layers' compute in both engines; with one GPU (no DP)
they are the whole per-layer transfer. The step adds (b) only. The GPU keeps the units in flight.

A copy moves its bytes over the GPU's PCIe link, shared by the GPUs of one PCIe switch, at the
measured pinned-copy rate (:data:`simcluster.perf.reliability.PINNED_COPY_EFFICIENCY`, 0.86 of the
line rate in both directions on an H100 host); DeepSpeed's ``pin_memory`` is assumed.

Booked as: (a)-(c) under ``optimizer`` (after the backward, like the GPU's Adam they replace; a
slow GPU does not slow them), the exposed per-layer copies under ``dp_comm`` with ZeRO-3's gathers.

Left out, stated: NVMe offload (ZeRO-Infinity's ``device: nvme``), ZeRO-Offload's one-step
delayed parameter update (section 5.2, which overlaps (b) with the next step's compute), the
overlap of (b) and (c) tile by tile, the wait behind the last DP bucket's reduction, PCIe latency
per copy, host memory bandwidth shared with the copies, and pinned staging buffers in host memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcluster import catalog
from simcluster.perf.comm_plan import ACT_BYTES
from simcluster.perf.memory_stage import StageParams
from simcluster.perf.reliability import snapshot_time_s
from simcluster.spec.hardware import TopologySpec
from simcluster.spec.scenario import Scenario
from simcluster.units import GiB

#: Host bytes per parameter of a GPU's shard under offload: fp32 weights 4 + Adam moments 8 (ZeRO's
#: K = 12) + the fp32 gradient partition 4 (module docstring).
HOST_STATE_BYTES = 16.0
#: The key a too-small host is reported under.
HOST_MEMORY_KEY = "host.memory_GiB"


def offloads_optimizer(s: Scenario) -> bool:
    """Whether the optimizer state lives in host memory (either offload)."""
    return s.parallelism.offload != "none"


def offloads_params(s: Scenario) -> bool:
    """Whether the 16-bit parameter shards live in host memory too (ZeRO-Infinity, CPU)."""
    return s.parallelism.offload == "optimizer+params"


def gpu_bytes(weights: float, grads: float, optimizer: float, offload: str,
              zero_stage: int) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per parameter left on the GPU, given the ZeRO-sharded
    bytes: the optimizer leaves; the gradient shard leaves under ZeRO-2/3; the weight shard
    leaves with ``optimizer+params`` (module docstring)."""
    if offload == "none":
        return weights, grads, optimizer
    return (0.0 if offload == "optimizer+params" else weights,
            grads if zero_stage < 2 else 0.0, 0.0)


def host_bytes_per_param(s: Scenario) -> float:
    """Host bytes per parameter of a GPU's ZeRO shard: 0 without offload, 16
    (:data:`HOST_STATE_BYTES`), plus the 16-bit weights with ``optimizer+params`` (an fp32 model
    fetches its fp32 master itself)."""
    if not offloads_optimizer(s):
        return 0.0
    extra = ACT_BYTES[s.precision] if offloads_params(s) and s.precision != "fp32" else 0.0
    return HOST_STATE_BYTES + extra


def shard_params(s: Scenario, dense: float, expert: float = 0.0) -> float:
    """Parameters of one GPU's ZeRO shard: dense over ``dp * cp``, experts over the expert
    data-parallel size (``tp*cp*dp / (expert_tp*ep)``; as :mod:`simcluster.perf.memory` shards
    the optimizer, ZeRO >= 1)."""
    par = s.parallelism
    return dense / (par.dp * par.cp) + (expert / par.expert_dp if expert else 0.0)


def host_bytes_per_node(s: Scenario, stages: Sequence[StageParams]) -> float:
    """Host memory one node needs for the offloaded state: the largest stage's shard bytes times
    the node's GPUs (every GPU of the node taken to hold that stage's shard)."""
    per_param = host_bytes_per_param(s)
    if not per_param:
        return 0.0
    shard = max(shard_params(s, p.dense, p.expert) for p in stages)
    return shard * per_param * s.cluster.topology.gpus_per_node


def host_refusal(host_bytes: float, capacity: float | None, topology: TopologySpec) -> str:
    """Why the offloaded state does not fit in host memory, naming the topology file and key, or
    ``""`` when it fits (or the capacity is not stated)."""
    if capacity is None or host_bytes <= capacity:
        return ""
    preset, _, refined = topology.name.partition("+")  # "NAME+custom": refined by the scenario
    where = (f"{HOST_MEMORY_KEY} of topologies/{preset}.yaml"
             + (" as the scenario refines it" if refined else "")
             if preset in catalog.names("topologies") else f"cluster.topology.{HOST_MEMORY_KEY}")
    return (f"offloaded state needs {host_bytes / GiB:.1f} GiB of host memory per node, "
            f"{capacity / GiB:.1f} GiB available ({where})")


def pcie_copy_s(s: Scenario, nbytes: float) -> float:
    """One GPU's copy of ``nbytes`` to or from pinned host memory while every GPU copies: the
    PCIe link shared by the GPUs of a switch, at the measured pinned-copy rate."""
    host = s.cluster.topology.host
    return snapshot_time_s(nbytes, host.pcie_Bps, host.gpus_per_pcie_switch)


def cpu_adam_s(s: Scenario, shard: float) -> float:
    """The node's CPU Adam over every GPU's ``shard`` parameters: ``gpus_per_node x shard /
    host.cpu_adam_params_per_s``."""
    topo = s.cluster.topology
    return topo.gpus_per_node * shard / topo.host.cpu_adam_params_per_s


@dataclass(frozen=True, slots=True)
class HostStep:
    """The offloaded optimizer step of one GPU, seconds (module docstring, (a)-(c))."""

    grad_copy_s: float  # one copy of the GPU's gradient shard to the host
    grad_copies: int  # per step: 1 (ZeRO-1), the micro-batches (ZeRO-2/3), 0 (copied per layer)
    adam_s: float
    param_copy_s: float  # the updated 16-bit shard back to the GPU (0: fetched per layer)

    def total_s(self, backward_s: float) -> float:
        """Seconds on the critical path, each gradient copy beside a backward of ``backward_s``."""
        exposed = max(0.0, self.grad_copy_s - backward_s)
        return self.grad_copies * exposed + self.adam_s + self.param_copy_s


def host_step(s: Scenario, held: float, expert: float, grad_bytes: float) -> HostStep | None:
    """The offloaded step of a GPU holding ``held`` parameters (``expert`` of them MoE experts)
    whose gradients are reduced in ``grad_bytes`` per element; None without offload."""
    if not offloads_optimizer(s):
        return None
    par = s.parallelism
    shard = shard_params(s, held - expert, expert)
    if offloads_params(s):
        return HostStep(0.0, 0, cpu_adam_s(s, shard), 0.0)
    copies = 1 if par.zero_stage < 2 else par.micro_batches
    return HostStep(pcie_copy_s(s, shard * grad_bytes), copies, cpu_adam_s(s, shard),
                    pcie_copy_s(s, shard * ACT_BYTES[s.precision]))


def host_step_s(s: Scenario, held: float, expert: float, grad_bytes: float,
                backward_s: float) -> float:
    """:meth:`HostStep.total_s` of :func:`host_step`, 0 without offload (both engines' call)."""
    step = host_step(s, held, expert, grad_bytes)
    return 0.0 if step is None else step.total_s(backward_s)


def layer_copies_s(s: Scenario, layer_params: float, grad_bytes: float) -> tuple[float, float]:
    """(fetch, drain) of one layer of ``layer_params`` under ``optimizer+params``: its 16-bit
    shard to the GPU before the all-gather, its gradient shard to the host after the
    reduce-scatter; (0, 0) otherwise."""
    if not offloads_params(s):
        return 0.0, 0.0
    shard = shard_params(s, layer_params)
    return (pcie_copy_s(s, shard * ACT_BYTES[s.precision]), pcie_copy_s(s, shard * grad_bytes))
