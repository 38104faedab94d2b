"""SC'21 Megatron-LM configurations as simcluster scenarios, and the paper's FLOP convention.

Source: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21 (arXiv 2104.04473), Table 1 (weak scaling) and Table 2 (PTD vs ZeRO-3) (ids
below, docs/catalog.md). Published numbers are TFLOP/s per GPU under the paper's Eq. 3 (hardware
FLOPs with full recompute); the paper gives no iteration time, so the comparison converts
simcluster's iteration time with that same formula.

Run settings per row come from the authors' own reproduction scripts, NVIDIA/Megatron-LM
``examples/sc21/run_table_1.sh`` (@cf547dea and @79a3bb6b, identical settings): micro-batch size,
layers per virtual pipeline stage (interleaving only where the script asks for it: 76B, 145B, 310B,
530B; the 39B and 1T rows run plain 1F1B) and the DDP implementation (PyTorch DDP, whose gradient
all-reduce overlaps the last backward, up to 18B; Megatron's local DDP, all-reduce after backward,
above). Table 2 has no script: its PTD rows use micro-batch 1 (published) and the virtual-stage
size the authors' scripts use for the same layouts (175B on PP 12: 2 layers, run_figure_12.sh and
run_figure_18.sh; 530B on PP 35: 1 layer, run_table_1.sh).

Fixed for every row (not fitted per row):
- ``--fp16`` (A100 peak 312 TFLOP/s, as the paper), full recompute (``--recompute-method
  uniform``), DGX A100 80 GB nodes with 8 x 200 Gb/s HDR (Selene);
- no flash attention (2021: scores GEMM, Megatron's fused scale-mask-softmax, dropout, AV GEMM);
- no gradient-accumulation fusion (it came to Megatron-LM later): each micro-batch's weight
  gradients are added into the 16-bit gradient buffer by a separate pass;
- no distributed optimizer (ZeRO 0) for PTD rows; DeepSpeed ZeRO-3 rows use zero_stage 3 with
  their published micro-batch and no prefetching (DeepSpeed 0.3's "async" gathers synchronised
  the device: deepspeed PR #1188);
- the catalog's A100 GEMM model as it is (tile/wave model and level fitted on the EleutherAI
  cookbook A100 sweeps, docs/catalog.md). Until issue 13 these cases pinned the MAMF best-shape
  efficiency, 0.869, which left every PTD row 1-8% optimistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster.perf.flops import sc21_eq3_flops
from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario


@dataclass(frozen=True)
class Case:
    """One published configuration and the run settings of the authors' scripts.

    ``micro`` is the micro-batch size, ``chunk_layers`` the layers per virtual pipeline stage
    (``--num-layers-per-virtual-pipeline-stage``; None: plain 1F1B) and ``torch_ddp`` whether
    PyTorch DDP (gradient all-reduce overlapped with backward) rather than Megatron's local DDP
    (all-reduce after backward) was used.
    """

    id: str
    layers: int
    hidden: int
    heads: int
    gpus: int
    tp: int
    pp: int
    batch: int
    micro: int
    tflops: float
    chunk_layers: int | None = None
    torch_ddp: bool = False

    @property
    def zero3(self) -> bool:
        """DeepSpeed ZeRO-3 without model parallelism (Table 2)."""
        return "zero3" in self.id


CASES = [
    Case("sc21_table1_1.7B", 24, 2304, 24, 32, 1, 1, 512, 16, 137, torch_ddp=True),
    Case("sc21_table1_3.6B", 30, 3072, 32, 64, 2, 1, 512, 16, 138, torch_ddp=True),
    Case("sc21_table1_7.5B", 36, 4096, 32, 128, 4, 1, 512, 16, 142, torch_ddp=True),
    Case("sc21_table1_18.4B", 40, 6144, 48, 256, 8, 1, 1024, 8, 135, torch_ddp=True),
    Case("sc21_table1_39.1B", 48, 8192, 64, 512, 8, 2, 1536, 4, 138),
    Case("sc21_table1_76.1B", 60, 10240, 80, 1024, 8, 4, 1792, 2, 140, chunk_layers=5),
    Case("sc21_table1_145.6B", 80, 12288, 96, 1536, 8, 8, 2304, 2, 148, chunk_layers=5),
    Case("sc21_table1_310.1B", 96, 16384, 128, 1920, 8, 16, 2160, 1, 155, chunk_layers=3),
    Case("sc21_table1_529.6B", 105, 20480, 128, 2520, 8, 35, 2520, 1, 163, chunk_layers=1),
    Case("sc21_table1_1008.0B", 128, 25600, 160, 3072, 8, 64, 3072, 1, 163),
    Case("sc21_table2_zero3_175B_384gpu", 96, 12288, 96, 384, 1, 1, 1536, 4, 144),
    Case("sc21_table2_zero3_175B_768gpu", 96, 12288, 96, 768, 1, 1, 1536, 2, 88),
    Case("sc21_table2_zero3_175B_1536gpu", 96, 12288, 96, 1536, 1, 1, 1536, 1, 44),
    Case("sc21_table2_zero3_530B_640gpu", 105, 20480, 128, 640, 1, 1, 2560, 4, 138),
    Case("sc21_table2_zero3_530B_1120gpu", 105, 20480, 128, 1120, 1, 1, 2240, 2, 98),
    Case("sc21_table2_zero3_530B_2240gpu", 105, 20480, 128, 2240, 1, 1, 2240, 1, 48),
    Case("sc21_table2_ptd_175B_384gpu", 96, 12288, 96, 384, 8, 12, 1536, 1, 153, chunk_layers=2),
    Case("sc21_table2_ptd_175B_768gpu", 96, 12288, 96, 768, 8, 12, 1536, 1, 149, chunk_layers=2),
    Case("sc21_table2_ptd_175B_1536gpu", 96, 12288, 96, 1536, 8, 12, 1536, 1, 141, chunk_layers=2),
    Case("sc21_table2_ptd_530B_560gpu", 105, 20480, 128, 560, 8, 35, 2240, 1, 171, chunk_layers=1),
    Case("sc21_table2_ptd_530B_1120gpu", 105, 20480, 128, 1120, 8, 35, 2240, 1, 167,
         chunk_layers=1),
    Case("sc21_table2_ptd_530B_2240gpu", 105, 20480, 128, 2240, 8, 35, 2240, 1, 159,
         chunk_layers=1),
]
VOCAB, SEQ = 51200, 2048


def _schedule(case: Case) -> dict[str, Any]:
    if case.chunk_layers is None:
        return {"schedule": "1f1b"}
    return {"schedule": "interleaved",
            "virtual_stages": case.layers // (case.pp * case.chunk_layers)}


def scenario(case: Case, execution: dict[str, Any] | None = None, **parallelism: Any) -> Scenario:
    """The simcluster scenario of ``case`` (see the module docstring for the fixed choices)."""
    execution = execution or {}
    model = {"name": case.id, "layers": case.layers, "hidden": case.hidden, "heads": case.heads,
             "vocab": VOCAB, "seq_len": SEQ, "tied_embeddings": True}
    topology = {"preset": "dgx-a100-80gb"}
    par = {"tp": case.tp, "pp": case.pp, "global_batch": case.batch, "micro_batch": case.micro,
           "recompute": "full", "zero_stage": 3 if case.zero3 else 0,
           **_schedule(case), **parallelism}
    return load_scenario({"name": case.id, "model": model, "precision": "fp16",
                          "execution": {"stack": "megatron-2021",
                                        "overlap_grad_reduce": case.torch_ddp, **execution},
                          "cluster": {"topology": topology, "nodes": case.gpus // 8},
                          "parallelism": par})


_CACHE: dict[tuple[str, str], float] = {}  # the big pipelines take seconds in the DES: once each


def predicted_tflops(s: Scenario, engine: str = "analytical") -> float:
    """simcluster's iteration time (``engine``: analytical or des) as TFLOP/s per GPU, SC'21 Eq. 3.

    Cached by (scenario name, engine) for the unmodified case scenarios.
    """
    key = (s.name, engine)
    if key not in _CACHE or s.name not in {c.id for c in CASES}:
        m = s.model
        flops = sc21_eq3_flops(s.parallelism.global_batch, m.seq_len, m.layers, m.hidden, m.vocab)
        seconds = simulate(s, engine=engine).step.iteration_time_s
        _CACHE[key] = flops / seconds / s.cluster.gpus / 1e12
    return _CACHE[key]


def table() -> list[tuple[str, float, float, float]]:
    """(id, published, analytical, DES) TFLOP/s per GPU for every case."""
    return [(c.id, c.tflops, predicted_tflops(scenario(c)), predicted_tflops(scenario(c), "des"))
            for c in CASES]
