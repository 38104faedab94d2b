"""vTrain single-node ground truth (1440 Megatron-DeepSpeed iterations on 2-8 A100) as scenarios.

Source: VIA-Research/vTrain ``data/ground_truth_single.csv`` @f8dda847 (copied byte for byte to
``tests/validation/data/vtrain_single_node.csv``), the
validation set of Bang et al., "vTrain: A Simulation Framework for Evaluating Cost-effective and
Compute-optimal Large Language Model Training", MICRO 2024 (arXiv 2312.12391). What is stated:

- ``data/README.md``: "All data points here are collected using Megatron-DeepSpeed codebase
  (https://github.com/microsoft/Megatron-DeepSpeed)".
- ``README.md``: validation is reproduced from ``config/validation/single/*.json``, one file per
  row in CSV order (``config_val_single_1439.json`` is the last row); ``..._0818.json`` and
  ``..._1439.json`` carry ``"gpu_name": "A100"``, ``"node_size": 8``, ``"use_checkpoint": true``,
  ``"pipeline_scheduling": "1f1b"``, ``"use_gradient_bucket": false``,
  ``"intra_node_bandwidth": 150`` (GB/s) and ``"inter_node_bandwidth": 800`` (Gb/s).
- ``src/config.py``: ``vocab_size`` defaults to 50257 (GPT-2 BPE); ``use_checkpoint`` is "Whether
  activation checkpointing is used"; ``use_gradient_bucket`` is "Whether PyTorch DDP's gradient
  bucketing is used".
- ``src/model/gpt_modeling.py`` (vTrain's profiled replica of the Megatron layer): FFN 4h with
  fused bias-GeLU, attention as ``baddbmm`` + ``FusedScaleMaskSoftmax`` + ``bmm`` (no flash
  attention), apex ``MixedFusedLayerNorm``; ``gpt_model.py`` builds the mask in ``half()`` (fp16).
- ``docker/Dockerfile``: CUDA 11.8, PyTorch 2.0.1, NVIDIA apex @2386a912.

Silent, and assumed here (docs/validation.md, "vTrain single-node"): the A100 variant and node
(the DGX A100 40 GB preset: SXM4 with NVSwitch, the part vTrain's MT-NLG example models; 40 vs 80 GB
changes only the HBM rate, 1555 vs 2039 GB/s); fp16 (the mask's ``half()``); the vocabulary padded
as Megatron pads it (``_vocab_size_with_padding``: a multiple of 128 x TP, so 50304 / 50432 /
50688 / 51200 for TP 1 / 2 / 4 / 8) with tied input and output embeddings (Megatron's GPT); the
gradient all-reduce after the last backward, not overlapped (``use_gradient_bucket: false``; the
DeepSpeed engine reduces at the accumulation boundary), no ZeRO partitioning, a separate gradient
accumulation pass per micro-batch (DeepSpeed's engine owns the accumulation buffers); the row's
micro-batch as measured (vTrain's own config replaces it by global/DP when PP = 1; the CSV keeps
the measured one). Rows with fewer than 8 GPUs run on the same node with ``gpus_per_node`` set to
the row's count. Every row maps (none is left out: see ``unmappable``).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario

DATA = Path(__file__).resolve().parent / "data" / "vtrain_single_node.csv"
GPT2_VOCAB = 50257
VOCAB_DIVISIBLE_BY = 128  # Megatron --make-vocab-size-divisible-by default
TOPOLOGY = "dgx-a100-40gb"
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class VTrainRow:
    """One measured iteration: the CSV's columns in order (iteration time in ms)."""

    index: int
    gpus: int
    global_batch: int
    micro_batch: int
    hidden: int
    heads: int
    layers: int
    seq_len: int
    tp: int
    dp: int
    pp: int
    iteration_ms: float

    @property
    def id(self) -> str:
        """A readable row id (CSV row number and layout)."""
        return (f"vtrain_{self.index:04d}_h{self.hidden}_l{self.layers}_tp{self.tp}dp{self.dp}"
                f"pp{self.pp}_mb{self.micro_batch}_gb{self.global_batch}")


def load_rows(path: Path = DATA) -> list[VTrainRow]:
    """Every row of the CSV (UTF-8 with BOM, CRLF), in file order."""
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        next(reader)
        return [_row(i, fields) for i, fields in enumerate(reader)]


def _row(index: int, fields: list[str]) -> VTrainRow:
    gpus, gb, mb, hidden, heads, layers, seq, tp, dp, pp = (int(x) for x in fields[:10])
    return VTrainRow(index, gpus, gb, mb, hidden, heads, layers, seq, tp, dp, pp, float(fields[10]))


def padded_vocab(tp: int) -> int:
    """GPT-2's vocabulary padded to a multiple of 128 x TP (Megatron ``_vocab_size_with_padding``)."""
    multiple = VOCAB_DIVISIBLE_BY * tp
    return -(-GPT2_VOCAB // multiple) * multiple


def unmappable(row: VTrainRow) -> str | None:
    """Why ``row`` cannot be a simcluster scenario, or None when it can."""
    if row.tp * row.dp * row.pp != row.gpus:
        return "TP x DP x PP differs from the GPU count"
    if row.gpus > GPUS_PER_NODE:
        return "more GPUs than one node"
    if row.global_batch % (row.dp * row.micro_batch):
        return "global batch not a multiple of DP x micro-batch"
    if row.layers % row.pp or row.heads % row.tp:
        return "layers or heads do not divide over PP or TP"
    return None


def scenario_mapping(row: VTrainRow) -> dict[str, Any]:
    """The scenario mapping of ``row`` (see the module docstring for the fixed choices)."""
    topology: dict[str, Any] = {"preset": TOPOLOGY}
    if row.gpus < GPUS_PER_NODE:
        topology.update(gpus_per_node=row.gpus, host={"gpus_per_pcie_switch": min(2, row.gpus)})
    return {
        "name": row.id,
        "model": {"name": row.id, "layers": row.layers, "hidden": row.hidden, "heads": row.heads,
                  "ffn_hidden": 4 * row.hidden, "vocab": padded_vocab(row.tp),
                  "seq_len": row.seq_len, "tied_embeddings": True},
        "precision": "fp16",
        "execution": {"stack": "deepspeed-megatron-2022"},
        "cluster": {"topology": topology, "nodes": 1},
        "parallelism": {"tp": row.tp, "pp": row.pp, "dp": row.dp,
                        "global_batch": row.global_batch, "micro_batch": row.micro_batch,
                        "schedule": "1f1b", "recompute": "full", "zero_stage": 0},
    }


def scenario(row: VTrainRow, host_op_us: float | None = None) -> Scenario:
    """The loaded simcluster scenario of ``row`` (``host_op_us``: override the stack's value, for
    the calibration script)."""
    items = [] if host_op_us is None else [f"execution.host_op_us={host_op_us}"]
    return load_scenario(scenario_mapping(row), items)


def predicted_ms(row: VTrainRow, engine: str = "analytical",
                 host_op_us: float | None = None) -> float:
    """simcluster's iteration time of ``row`` in milliseconds."""
    return simulate(scenario(row, host_op_us), engine=engine).step.iteration_time_s * 1e3


def signed_errors(rows: Iterable[VTrainRow], engine: str = "analytical",
                  host_op_us: float | None = None) -> list[float]:
    """predicted / measured - 1 for each row (negative: simcluster is faster than measured)."""
    return [predicted_ms(row, engine, host_op_us) / row.iteration_ms - 1 for row in rows]


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class ErrorSummary:
    """Error statistics of a set of rows (fractions, not percent)."""

    rows: int
    median_abs: float
    median_signed: float
    p90_abs: float


def summarise(errors: list[float]) -> ErrorSummary:
    """Median |error|, median signed error and p90 |error| of ``errors``."""
    absolute = [abs(e) for e in errors]
    return ErrorSummary(len(errors), statistics.median(absolute), statistics.median(errors),
                        percentile(absolute, 0.9))


def tp_only(row: VTrainRow) -> bool:
    """TP > 1 with PP = DP = 1: the step is compute plus intra-node TP all-reduces."""
    return row.tp > 1 and row.pp == 1 and row.dp == 1


def no_tp(row: VTrainRow) -> bool:
    """TP = 1: per-layer compute at full width, plus DP all-reduce and PP sends."""
    return row.tp == 1


SUBSETS: dict[str, Callable[[VTrainRow], bool]] = {
    "all rows": lambda row: True, "TP = 1 (no TP communication)": no_tp,
    "TP > 1, PP = DP = 1 (intra-node TP)": tp_only}
BREAKDOWN_KEYS = ("tp", "pp", "dp", "micro_batch", "seq_len", "hidden", "layers", "gpus")


def breakdown(rows: list[VTrainRow], errors: list[float],
              key: str) -> list[tuple[int, ErrorSummary]]:
    """(value of ``key``, summary of the rows with that value), by increasing value."""
    groups: dict[int, list[float]] = {}
    for row, error in zip(rows, errors, strict=True):
        groups.setdefault(getattr(row, key), []).append(error)
    return [(value, summarise(groups[value])) for value in sorted(groups)]
