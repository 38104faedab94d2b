"""simcluster's kernel, layer and memory model against measurements on GPUs of this project.

Sources (``analysis/device/measure_gpu.py``, 2026-11-26, driver 580.159.04, PyTorch 2.11.0 with
CUDA 13.0 and cuDNN 9.19; ``env.json`` of each folder; how each file was taken:
analysis/device/README.md):
- ``tests/validation/data/h100_measured/``: NVIDIA H100 80GB HBM3 (SXM, 132 SMs, 700 W limit), two
  runs (every section; the second ``steady`` and ``memvar``, ``steady_env.json``);
- ``tests/validation/data/h200_measured/``: NVIDIA H200 (SXM, 141 GB HBM3e, 132 SMs, 700 W limit),
  one run (attention, layers, membw, steady, sustained).
Every comparison here is a prediction of the catalog as it stands, fitted on published sources,
against a measurement it was not fitted on.

Conventions: error = predicted / measured - 1 (positive: simcluster too fast). Layers are compared
under the eager PyTorch stack the measurement ran (``elementwise="eager"``, bf16, no tensor
parallelism); attention points in the FlashAttention benchmark convention (module docstring of
``analysis/device/gpu_attention.py``).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from simcluster import catalog
from simcluster.perf.compute import layer_times
from simcluster.perf.kernels.attention import fused_rates, part_scale
from simcluster.perf.kernels.gemm import achievable_matmul_flops_per_s, gemm_operator
from simcluster.perf.memory_stage import layer_activation_bytes
from simcluster.spec import schema
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec

DATA = Path(__file__).parent / "data"
#: The catalog accelerator of each measured GPU and the folder of its measurements.
GPUS = {"h100": ("h100-sxm", DATA / "h100_measured"), "h200": ("h200-sxm", DATA / "h200_measured")}
#: simcluster's kernel name of each measured PyTorch backend (catalog attention.yaml).
KERNELS = {"sdpa-flash": "flash2", "cudnn": "cudnn"}
#: GEMM dtype of each measured variant (fp8 with one scale per tensor: what the catalog level is).
GEMM_DTYPES = {"bf16": "bf16", "fp8_tensor": "fp8"}


@cache
def accelerator(gpu: str) -> AcceleratorSpec:
    return schema.parse(AcceleratorSpec, catalog.entry("accelerators", GPUS[gpu][0]))


@cache
def rows(gpu: str, name: str) -> tuple[dict[str, str], ...]:
    """The rows of ``<name>.csv`` of ``gpu``'s measurements."""
    with (GPUS[gpu][1] / f"{name}.csv").open(newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


def median_abs(errors: Iterable[float]) -> float:
    return statistics.median(abs(e) for e in errors)


def layer_model(row: dict[str, str]) -> ModelSpec:
    """The measured layer as a simcluster model (``analysis/device/gpu_layers.py``): GPT rows are
    MPT blocks (LayerNorm, GELU, no biases, no dropout), Llama rows RMSNorm, RoPE, SwiGLU."""
    gpt = row["kind"] == "gpt"
    return ModelSpec(name=row["shape"], layers=int(row["layers"]), hidden=int(row["hidden"]),
                     heads=int(row["heads"]), kv_heads=int(row["kv_heads"]),
                     ffn_hidden=int(row["ffn"]), ffn_act="gelu" if gpt else "swiglu",
                     vocab=50304, seq_len=int(row["seq"]), bias=False, dropout=False,
                     position="learned" if gpt else "rope", norm="layernorm" if gpt else "rmsnorm")


def _predicted_ms(gpu: str, row: dict[str, str]) -> tuple[float, float]:
    """simcluster's (forward, forward + backward) ms of a ``layers.csv`` row: bf16, no TP, the
    row's attention kernel, eager element-wise kernels (what the measurement ran)."""
    times = layer_times(layer_model(row), accelerator(gpu), "bf16", int(row["batch"]),
                        int(row["seq"]), 1, attention=row["attention"], elementwise="eager")
    return times.forward_s * 1e3, (times.forward_s + times.backward_s) * 1e3


def compiled_layer_error(row: dict[str, str]) -> float:
    """Forward + backward error of a layer run under ``torch.compile`` (``layers_compiled.csv``)
    against the model's fused element-wise kernels (``elementwise: fused``)."""
    times = layer_times(layer_model(row), accelerator("h100"), "bf16", int(row["batch"]),
                        int(row["seq"]), 1, attention=row["attention"], elementwise="fused")
    return (times.forward_s + times.backward_s) * 1e3 / float(row["fwd_bwd_ms_per_layer"]) - 1


def moe_host_floor_ms(config: str) -> tuple[float, float]:
    """(host issue time, GPU time) in ms of the whole eager MoE block's forward + backward at its
    fewest tokens (``moe_layer.csv``, no host synchronisation): how long a layer's launches take."""
    first = min((r for r in rows("h100", "moe_layer") if r["config"] == config and r["sync"] == "0"),
                key=lambda r: int(r["tokens"]))
    return float(first["host_fwd_bwd_ms"]), float(first["fwd_bwd_ms"])


def mcore_moe_kernel_fit() -> tuple[float, float]:
    """(kernels per local expert, fixed kernels) of Megatron-Core's MoE layer, forward+backward
    (``h200_measured/mcore_moe.csv``): a least-squares line through every row."""
    points = [(int(r["local_experts"]), int(r["kernels_fwd_bwd"])) for r in rows("h200", "mcore_moe")]
    n = len(points)
    mean_e = sum(e for e, _ in points) / n
    mean_k = sum(k for _, k in points) / n
    slope = (sum((e - mean_e) * (k - mean_k) for e, k in points)
             / sum((e - mean_e) ** 2 for e, _ in points))
    return slope, mean_k - slope * mean_e


def layer_errors(gpu: str, row: dict[str, str]) -> tuple[float, float]:
    """(forward, forward + backward) error of one measured layer row."""
    fwd, both = _predicted_ms(gpu, row)
    return (fwd / float(row["fwd_ms_per_layer"]) - 1,
            both / float(row["fwd_bwd_ms_per_layer"]) - 1)


def steady_layer_error(gpu: str, row: dict[str, str]) -> float:
    """Error of a layer's forward + backward held for seconds at the power limit (cuDNN): the
    burst row of the same shape and kernel gives the prediction."""
    (burst,) = [r for r in rows(gpu, "layers")
                if r["shape"] == row["name"] and r["attention"] == "cudnn"]
    return _predicted_ms(gpu, burst)[1] / float(row["ms"]) - 1


def gemm_error(gpu: str, row: dict[str, str]) -> float:
    """Error of a GEMM held for a second at the power limit (``steady.csv``)."""
    m, n, k = (int(v) for v in row["name"].split("x"))
    predicted = achievable_matmul_flops_per_s(accelerator(gpu), GEMM_DTYPES[row["dtype"]], m, n, k)
    return predicted / (float(row["tflops"]) * 1e12) - 1


def steady_gemms(gpu: str, dtype: str) -> list[dict[str, str]]:
    return [r for r in rows(gpu, "steady") if r["what"] == "gemm" and r["dtype"] == dtype]


def sustained_tflops(gpu: str, dtype: str, after_s: float = 10.0) -> float:
    """Median rate of the back-to-back 8192^3 run (25 s on the H100, 15 s on the H200) after its
    first ``after_s`` seconds."""
    return statistics.median(float(r["tflops"]) for r in rows(gpu, "sustained")
                             if r["dtype"] == dtype and float(r["t_s"]) > after_s)


def attention_errors(gpu: str, kernel: str, min_seq: int = 0, max_seq: int = 16384,
                     head_dims: tuple[int, ...] = (64, 128)) -> list[tuple[float, float]]:
    """(forward, backward) error of the catalog table of ``kernel`` against each measured point
    with ``min_seq <= seq <= max_seq``."""
    out = []
    scale = part_scale(accelerator(gpu), "h100-sxm")  # the Hopper tables were measured on an H100
    for r in rows(gpu, "attention"):
        seq, hd = int(r["seq"]), int(r["head_dim"])
        if r["kernel"] != kernel or not min_seq <= seq <= max_seq or hd not in head_dims:
            continue
        rates = fused_rates("hopper", KERNELS[kernel], "bf16", hd, seq, r["causal"] == "1")
        assert rates is not None, f"no {KERNELS[kernel]} table for hopper"
        out.append((scale * rates[0] / 1e12 / float(r["fwd_tflops"]) - 1,
                    scale * rates[1] / 1e12 / float(r["bwd_tflops"]) - 1))
    return out


def expert_gemm_errors(gpu: str, tokens_per_expert: tuple[int, ...],
                       min_ms: float = 0.2) -> list[float]:
    """Errors of the batched GEMM operator (``batch`` = local experts: the tile model's rate, never
    faster than reading the three matrices, :func:`~simcluster.perf.kernels.gemm.gemm_operator`)
    against the grouped expert GEMMs of ``moe.csv`` (``torch._grouped_mm``, balanced routing) with
    the given tokens per expert, kernels of at least ``min_ms`` (shorter ones time the harness's
    launches). Error = measured time / predicted time - 1 (the rate convention)."""
    out = []
    for r in rows(gpu, "moe"):
        if (r["what"] != "expert_gemm" or r["impl"] != "grouped" or r["skew"] != "0"
                or int(r["tokens_per_expert"]) not in tokens_per_expert or float(r["ms"]) < min_ms):
            continue
        shape = (int(r["tokens_per_expert"]), int(r["N"]), int(r["K"]))
        op = gemm_operator(accelerator(gpu), "bf16", "expert", shape, int(r["local_experts"]))
        out.append(float(r["ms"]) / (op.time_s * 1e3) - 1)
    return out


#: The fragmentation loop of analysis/device/alloc_fragmentation.py: Llama 2 13B layers (h 5120,
#: ffn 13824, MHA) and a 32,000 x 5120 head; bf16 parameters and two bf16 Adam states are resident
#: at the forward peak (gradients are set to None each step): 6 bytes per parameter.
ALLOC_LAYER_PARAMS = 4 * 5120**2 + 3 * 5120 * 13824
ALLOC_HEAD_PARAMS = 32000 * 5120


def allocator_fragmentation(row: dict[str, str]) -> float:
    """``f = reserve / (dynamic + reserve)`` of one ``alloc.csv`` row, simcluster's definition
    (perf/memory_overheads.py): the reserve over what is allocated and freed every step, with
    dynamic = peak allocated - the resident parameters and optimizer states."""
    params = int(row["layers"]) * ALLOC_LAYER_PARAMS + ALLOC_HEAD_PARAMS
    allocated = float(row["peak_allocated_GiB"]) * 2**30
    reserve = float(row["peak_reserved_GiB"]) * 2**30 - allocated
    return reserve / (allocated - 6 * params + reserve)


def achieved_bandwidth_fraction(gpu: str, op: str) -> float:
    """Measured GB/s of the 1 GiB ``op`` over the part's HBM bandwidth (3350 / 4800 GB/s)."""
    (row,) = [r for r in rows(gpu, "membw") if r["op"] == op]
    return float(row["GBps"]) * 1e9 / accelerator(gpu).memory_bandwidth_Bps


def stack_activation_error(row: dict[str, str]) -> float:
    """Error of the activation bytes per layer of a measured stack: the stack's first layer keeps
    its input outside the measurement (2 bytes per token and hidden unit)."""
    model = layer_model(row)
    tokens_hidden = int(row["batch"]) * int(row["seq"]) * int(row["hidden"])
    layers = int(row["layers"])
    per_layer = layer_activation_bytes(model, int(row["batch"]), int(row["seq"]), 1, False, "none")
    predicted = (layers * per_layer - 2 * tokens_hidden) / layers
    return predicted / (float(row["activation_MiB_per_layer"]) * 2**20) - 1
