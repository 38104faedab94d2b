"""Hardware specifications: an accelerator and the topology of a cluster built from it.

The topology file (schema ``simcluster/topology/v1``) describes one node (GPUs, their scale-up fabric
and the PCIe/CPU host side) and how nodes connect (NICs and the scale-out fabric). Bandwidths are
line rates per direction; how much of them a collective achieves is calibration, not topology.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simcluster.errors import SpecError
from simcluster.spec.schema import spec_field

#: Peak-rate keys of an accelerator (tensor-core input formats). ``fp8`` covers the per-tensor
#: scaled E4M3/E5M2 GEMMs and MXFP8 (the same tensor-core rate on Blackwell), ``fp4`` NVFP4/MXFP4.
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
#: Scenario precisions: the training dtype, or the low-precision format of the linear layers'
#: GEMMs (fp8, mxfp8, nvfp4: Transformer Engine recipes, perf/kernels/lowp.py).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "mxfp8", "nvfp4")
#: Low-precision formats and the tensor-core peak (``peak_TFLOPS`` key) their GEMMs run at.
LOW_PRECISION = {"fp8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}
#: Architectures whose tensor cores take the block-scaled formats (MXFP8, NVFP4: sm100 and later;
#: NVIDIA Blackwell architecture technical brief; Hopper has no block-scaled MMA).
BLOCK_SCALED_ARCHS = ("blackwell",)
#: GPU architectures the kernel models key their data on (perf/kernels; "" = not stated).
ARCHS = ("volta", "ampere", "ada", "hopper", "blackwell", "cdna3", "")
SCALE_UP_KINDS = ("nvswitch", "nvlink-bridge", "pcie", "nvl-domain")
FABRICS = ("fat-tree", "rail-optimized", "single-switch")

# Node-level counts have upper limits far above real hardware, so that a typo (8e6 NICs) is refused
# instead of building a link graph of millions of vertices per node.
#: GPUs in one node: real servers hold 4-16 (DGX H100 8, HGX B200 8, GB200 tray 4); 1024 is above
#: the largest NVLink domain sold (NVL576), which a node could at most be.
MAX_GPUS_PER_NODE = 1024
#: GPUs in one NVLink domain: NVL72 and NVL576 exist; 16384 is far above both.
MAX_DOMAIN_GPUS = 16384
#: Scale-out NICs in one node: real nodes have 1-16 (DGX H100: 8 compute NICs).
MAX_NICS_PER_NODE = 64
#: CPU sockets in one host: real hosts have 1-8.
MAX_CPU_SOCKETS = 16
#: Ports of one switch: real switch ASICs have 32-512 (Quantum-2 64 x 400G, Tomahawk 5 512 x 100G).
MAX_SWITCH_RADIX = 4096
#: DeepSpeed's CPU Adam, parameters updated per second on one host: "it reduces the optimizer time
#: from 56 seconds to 8.2 seconds to an 11.6B parameter GPT2 model" (R. Yazdani Aminabadi,
#: deepspeedai/DeepSpeed PR #735, 2021-02-08; the host is not named), 11.6e9 / 8.2 = 1.41e9. The
#: same team states 5.1x to 6.5x over PyTorch's CPU Adam for 1-10B parameters with AVX-512
#: (github.com/deepspeedai/DeepSpeed/blob/master/docs/_pages/features.md, "CPU-Adam"). A desktop
#: CPU with two memory channels is likely slower: set the topology's own
#: (host.cpu_adam_params_per_s).
CPU_ADAM_PARAMS_PER_S = 1.41e9
#: A price's date: a year, a month or a day (``2022``, ``2022-03``, ``2022-03-29``).
AS_OF_PATTERN = re.compile(r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")


def check_dated_source(as_of: str, source: str) -> None:
    """A price carries its date (``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``) and a non-empty source."""
    if not AS_OF_PATTERN.match(as_of):
        raise SpecError("as_of", f"expected a date YYYY, YYYY-MM or YYYY-MM-DD, got {as_of!r}")
    if not source.strip():
        raise SpecError("source", "must cite where the price comes from (a page, a press release)")


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceleratorPriceSpec:
    """Public prices of one accelerator, dated and cited (docs/cost.md).

    A price without ``as_of`` and ``source`` is refused: a number nobody can check is not data.
    """

    buy_usd: float | None = spec_field(None, unit="usd", gt=0,
                                       doc="one GPU: launch MSRP or list price")
    rent_per_gpu_hour_usd: float | None = spec_field(None, unit="usd", gt=0,
                                                     doc="public on-demand cloud price per GPU-hour")
    as_of: str = spec_field(doc="date of the price: YYYY, YYYY-MM or YYYY-MM-DD")
    source: str = spec_field(doc="citation: vendor page, press release or price page, with URL")

    def __post_init__(self) -> None:
        if self.buy_usd is None and self.rent_per_gpu_hour_usd is None:
            raise SpecError("buy_usd", "a price section needs buy_usd or rent_per_gpu_hour_usd")
        check_dated_source(self.as_of, self.source)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePriceSpec:
    """Public price and maximum power of one node (a server or a box), dated and cited."""

    node_usd: float | None = spec_field(None, unit="usd", gt=0, doc="one whole node (server, box)")
    node_power_W: float | None = spec_field(None, unit="W", gt=0,
                                            doc="maximum system power of one node (datasheet)")
    nic_usd: float | None = spec_field(None, unit="usd", ge=0,
                                       doc="one scale-out NIC (bought with the nodes, docs/cost.md)")
    switch_port_usd: float | None = spec_field(
        None, unit="usd", ge=0, doc="one scale-out switch port: a switch's price over its ports "
        "(cables and optics not priced; docs/cost.md)")
    as_of: str = spec_field(doc="date of the price: YYYY, YYYY-MM or YYYY-MM-DD")
    source: str = spec_field(doc="citation: vendor page, press release or datasheet, with URL")

    def __post_init__(self) -> None:
        if self.node_usd is None and self.node_power_W is None:
            raise SpecError("node_usd", "a price section needs node_usd or node_power_W")
        check_dated_source(self.as_of, self.source)


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmTileSpec:
    """Tile/wave GEMM model of one accelerator (docs/catalog.md, "GEMM size model").

    The output is cut into ``tile_m x tile_n`` tiles that run in waves of ``sms`` (one tile per SM
    at a time); each tile loops over ``K`` with a fixed per-tile cost worth ``k_overhead`` more
    elements of ``K`` (prologue, pipeline fill, epilogue). When the tiles do not fill the SMs, the
    reduction may be split into up to ``max_split_k`` parts (cuBLAS split-K). The rate is anchored
    at ``reference_mnk``, the shape the accelerator's ``matmul_efficiency`` was measured at (MAMF).
    """

    sms: int = spec_field(ge=1, le=4096, doc="streaming multiprocessors (datasheet)")
    tile_m: int = spec_field(ge=1, le=4096, doc="output tile rows of one thread block")
    tile_n: int = spec_field(ge=1, le=4096, doc="output tile columns of one thread block")
    k_overhead: float = spec_field(ge=0, doc="fixed per-tile cost, in elements of K (fitted)")
    max_split_k: int = spec_field(1, ge=1, le=64, doc="largest split of K over more thread blocks")
    reference_mnk: tuple[int, ...] = spec_field(
        ge=1, doc="the GEMM shape matmul_efficiency was measured at, [M, N, K]")
    source: str = spec_field("", doc="where the parameters come from")

    def __post_init__(self) -> None:
        if len(self.reference_mnk) != 3 or min(self.reference_mnk) < 1:
            raise SpecError("reference_mnk", f"expected three dimensions >= 1, got "
                            f"{list(self.reference_mnk)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceleratorSpec:
    """One accelerator: memory, dense peak per dtype, and its achievable-rate calibration.

    Attributes
    ----------
    peak_flops_per_s : dict[str, float]
        Dense (no sparsity) peak per dtype, FLOP/s.
    matmul_efficiency : dict[str, float]
        Best-shape achievable matmul rate over peak, per dtype (MAMF-style measurement).
    gemm_half_dim : int
        GEMM dimension at which the per-dimension efficiency factor ``d/(d+half)`` is one half
        (used when ``gemm_tiles`` is not given).
    gemm_tiles : GemmTileSpec or None
        Tile/wave GEMM model fitted on published GEMM sweeps (A100, H100); replaces the
        half-dimension curve when given.
    memory_efficiency : float
        Achievable fraction of memory bandwidth for streaming (memory-bound) kernels.
    attention_efficiency, attention_backward_efficiency : float
        Fused-attention forward and backward rates over the reference matmul rate where no kernel
        table applies (the kernels' published tables, by ``arch``, replace them:
        :mod:`simcluster.perf.kernels.attention`).
    arch : str
        Architecture whose kernel tables apply (``hopper``, ``ampere`` ...).
    power_limit_W, static_power_W : float
        Board power limit (None: ``tdp_W``) and the power that does not scale with the SM clock:
        a limit below the TDP slows compute-bound kernels (:mod:`simcluster.perf.kernels.clock`).
    levels_power_W : float or None
        Board power at which the compute levels were measured (None: ``tdp_W``); a part whose
        levels are borrowed from another part runs its own limit's clock relative to it.
    sms : int
        Streaming multiprocessors; the share a collective's kernel takes from compute running
        beside it is ``execution.comm_sms / sms`` (0: unknown, no contention).
    """

    name: str = spec_field("custom")
    description: str = spec_field("")
    vendor: str = spec_field("")
    arch: str = spec_field(
        "", choices=ARCHS, doc="architecture whose published kernel tables apply (attention "
        "kernels, docs/catalog.md); empty: none, the efficiency model")
    memory_bytes: float = spec_field(unit="GiB", gt=0)
    memory_bandwidth_Bps: float = spec_field(unit="GBps", gt=0)
    peak_flops_per_s: dict[str, float] = spec_field(unit="TFLOPS", gt=0, keys=DTYPES)
    matmul_efficiency: dict[str, float] = spec_field({}, gt=0, le=1, keys=DTYPES)
    gemm_half_dim: int = spec_field(128, ge=0)
    gemm_tiles: GemmTileSpec | None = spec_field(
        None, doc="tile/wave GEMM model (docs/catalog.md); replaces gemm_half_dim when given")
    fp8_gemm_tiles: GemmTileSpec | None = spec_field(
        None, doc="tile/wave GEMM model of the fp8 tensor-core GEMMs where it differs from "
        "gemm_tiles (fitted on the part's fp8 sweep; docs/catalog.md); null: gemm_tiles")
    fp4_gemm_tiles: GemmTileSpec | None = spec_field(
        None, doc="tile/wave GEMM model of the fp4 (NVFP4) GEMMs; null: gemm_tiles")
    memory_efficiency: float = spec_field(0.8, gt=0, le=1)
    attention_efficiency: float = spec_field(
        0.70, gt=0, le=1, doc="fused attention forward rate over the reference matmul rate, used "
        "only where no kernel table applies (arch without one; docs/catalog.md)")
    attention_backward_efficiency: float = spec_field(
        0.60, gt=0, le=1, doc="fused attention backward rate over the reference matmul rate, "
        "used only where no kernel table applies")
    sms: int = spec_field(
        0, ge=0, le=4096, doc="streaming multiprocessors (compute units), from the architecture "
        "whitepaper; 0: unknown, and collectives running beside compute take none of it")
    tdp_W: float = spec_field(0.0, unit="W", ge=0)
    power_limit_W: float | None = spec_field(
        None, unit="W", gt=0, doc="board power limit (nvidia-smi -pl); below tdp_W it lowers the "
        "SM clock and the GEMM and attention rates with it (perf/kernels/clock.py); null: tdp_W, "
        "where the catalog's rates were measured")
    static_power_W: float = spec_field(
        144.0, unit="W", ge=0, doc="power that does not scale with the SM clock (leakage, HBM, "
        "board); default: the A100 SXM's, fitted on the Perseus locked-clock profiles "
        "(analysis/fit_static_power.py)")
    levels_power_W: float | None = spec_field(
        None, unit="W", gt=0, doc="board power at which the part's compute levels "
        "(matmul_efficiency, the tile fits) hold; null: tdp_W. A part that borrows another "
        "part's levels names that part's TDP, and its own power limit moves the SM clock from "
        "there by the cubic power law (perf/kernels/clock.py)")
    price: AcceleratorPriceSpec | None = spec_field(None)

    def __post_init__(self) -> None:
        if not self.peak_flops_per_s:
            raise SpecError("peak_TFLOPS", "needs at least one dtype, e.g. {bf16: 312}")
        for dtype in self.matmul_efficiency:
            if dtype not in self.peak_flops_per_s:
                raise SpecError(f"matmul_efficiency.{dtype}", "has no peak_TFLOPS entry")
        limit = self.power_limit_W
        if limit is not None and self.tdp_W and limit > self.tdp_W:
            raise SpecError("power_limit_W", f"{limit:g} W is above tdp_W {self.tdp_W:g} W: the "
                            "catalog's rates are measured at the TDP, a higher limit is not modelled")
        if self.levels_power_W is not None and self.levels_power_W <= self.static_power_W:
            raise SpecError("levels_power_W", f"{self.levels_power_W:g} W is at or below "
                            f"static_power_W {self.static_power_W:g} W: no power left for the SMs")
        for key, tiles in (("gemm_tiles", self.gemm_tiles), ("fp8_gemm_tiles", self.fp8_gemm_tiles),
                           ("fp4_gemm_tiles", self.fp4_gemm_tiles)):
            if self.sms and tiles is not None and tiles.sms != self.sms:
                raise SpecError(f"{key}.sms", f"{tiles.sms} differs from the accelerator's sms "
                                f"{self.sms}")

    def tiles(self, dtype: str) -> GemmTileSpec | None:
        """The tile/wave GEMM model of ``dtype``'s GEMMs (its own block, else ``gemm_tiles``)."""
        if dtype == "fp8" and self.fp8_gemm_tiles is not None:
            return self.fp8_gemm_tiles
        if dtype == "fp4" and self.fp4_gemm_tiles is not None:
            return self.fp4_gemm_tiles
        return self.gemm_tiles

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype`` (``SpecError`` when the chip lacks it)."""
        if dtype not in self.peak_flops_per_s:
            have = ", ".join(self.peak_flops_per_s)
            raise SpecError("precision", f"{self.name} has no {dtype} peak (has {have})")
        return self.peak_flops_per_s[dtype]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleUpSpec:
    """The fabric inside a node (or an NVLink domain spanning nodes)."""

    kind: str = spec_field(choices=SCALE_UP_KINDS)
    bandwidth_Bps: float = spec_field(unit="GBps", gt=0, doc="per GPU (per bridge), per direction")
    latency_s: float = spec_field(
        2e-6, unit="us", ge=0, doc="one GPU-to-GPU hop: the flow engine's path latency, and in the "
        "collective model every algorithm step moves by its difference from the calibration "
        "class's link_latency_us (docs/collectives.md)")
    nvls: bool = spec_field(False, doc="NVLink SHARP (in-switch reduction)")
    domain_gpus: int = spec_field(0, ge=0, le=MAX_DOMAIN_GPUS, doc="nvl-domain: GPUs in one NVLink domain")
    bridge_gpus: int = spec_field(2, ge=2, le=MAX_GPUS_PER_NODE,
                                  doc="nvlink-bridge: GPUs joined by one bridge")

    def __post_init__(self) -> None:
        if self.nvls and self.kind not in ("nvswitch", "nvl-domain"):
            raise SpecError("nvls", f"needs an NVSwitch (kind nvswitch or nvl-domain), not {self.kind}")
        if self.kind == "nvl-domain" and self.domain_gpus < 1:
            raise SpecError("domain_gpus", "kind nvl-domain needs domain_gpus >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSpec:
    """The PCIe and CPU side of a node."""

    pcie_Bps: float = spec_field(32e9, unit="GBps", gt=0, doc="per GPU x16 link, per direction")
    pcie_latency_s: float = spec_field(1e-6, unit="us", ge=0)
    gpus_per_pcie_switch: int = spec_field(1, ge=1, le=MAX_GPUS_PER_NODE)
    cpu_sockets: int = spec_field(1, ge=1, le=MAX_CPU_SOCKETS)
    inter_socket_Bps: float = spec_field(32e9, unit="GBps", gt=0)
    memory_bytes: float | None = spec_field(
        None, unit="GiB", gt=0, doc="host (CPU) memory of one node, checked against the state "
        "parallelism.offload keeps there; null: not stated, not checked")
    cpu_adam_params_per_s: float = spec_field(
        CPU_ADAM_PARAMS_PER_S, gt=0, doc="parameters the node's CPUs update per second with "
        "DeepSpeed's CPU Adam (parallelism.offload), shared by the node's GPUs; default: 11.6B "
        "parameters in 8.2 s (DeepSpeed PR #735, AVX CPU Adam on a server host)")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleOutSpec:
    """NICs and the fabric between nodes."""

    nics_per_node: int = spec_field(1, ge=0, le=MAX_NICS_PER_NODE)
    nic_Bps: float = spec_field(12.5e9, unit="Gbps", gt=0, doc="per NIC, per direction")
    fabric: str = spec_field("fat-tree", choices=FABRICS)
    oversubscription: float = spec_field(1.0, ge=1.0, doc="leaf downlink / uplink bandwidth")
    latency_s: float = spec_field(
        5e-6, unit="us", ge=0, doc="NIC to NIC: the flow engine's path latency, and in the "
        "collective model every inter-node step moves by its difference from the calibration "
        "class's link_latency_us (docs/collectives.md)")
    switch_radix: int = spec_field(64, ge=2, le=MAX_SWITCH_RADIX)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologySpec:
    """A node design and how nodes are joined (docs/scenarios.md, topology files)."""

    schema: str = spec_field("simcluster/topology/v1", choices=("simcluster/topology/v1",))
    name: str = spec_field("custom")
    description: str = spec_field("")
    accelerator: AcceleratorSpec = spec_field()
    gpus_per_node: int = spec_field(ge=1, le=MAX_GPUS_PER_NODE)
    scale_up: ScaleUpSpec = spec_field()
    host: HostSpec = spec_field(HostSpec())
    scale_out: ScaleOutSpec = spec_field(ScaleOutSpec())
    price: NodePriceSpec | None = spec_field(None)

    def __post_init__(self) -> None:
        up = self.scale_up
        if up.kind == "nvlink-bridge" and self.gpus_per_node % up.bridge_gpus:
            raise SpecError("scale_up.bridge_gpus",
                            f"{up.bridge_gpus} must divide gpus_per_node={self.gpus_per_node}")
        if up.kind == "nvl-domain" and up.domain_gpus % self.gpus_per_node:
            raise SpecError("scale_up.domain_gpus",
                            f"{up.domain_gpus} must be a multiple of gpus_per_node={self.gpus_per_node}")
        if self.host.gpus_per_pcie_switch > self.gpus_per_node:
            raise SpecError("host.gpus_per_pcie_switch",
                            f"{self.host.gpus_per_pcie_switch} exceeds gpus_per_node={self.gpus_per_node}")
