"""SC'21 Megatron-LM configurations as simcluster scenarios, and the paper's FLOP convention.

Source: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21 (arXiv 2104.04473), Table 1 (weak scaling) and Table 2 (PTD vs ZeRO-3), as
transcribed in shared/calibration/published.yaml (ids below). Published numbers are TFLOP/s per GPU
under the paper's Eq. 3 (hardware FLOPs with full recompute); the comparison converts simcluster's
iteration time with that same formula (calibration/README.md section 9).

Choices the paper does not state, fixed once for every row (not fitted per row):
- micro-batch 1 wherever pipelining is used (Table 2 reports 1 for every PTD row); without
  pipelining (Table 1 rows with pp = 1) the largest of 4, 2, 1 that divides the per-replica batch;
- interleaved 1F1B (the paper's default for end-to-end runs) with v = 2 virtual stages where the
  layers split evenly, else the smallest v > 1 that does, else plain 1F1B;
- no flash attention (2021: scores GEMM, Megatron's fused scale-mask-softmax, dropout, AV GEMM);
- DP gradient all-reduce after the backward pass, not overlapped (Megatron-LM of 2021), no
  distributed optimizer (ZeRO 0) for PTD rows; DeepSpeed ZeRO-3 rows use zero_stage 3;
- fp16 (A100 peak 312 TFLOP/s, as the paper), full recompute, on DGX A100 80 GB nodes with 8 x
  200 Gb/s HDR (Selene);
- the GEMM efficiency of the software of the time: A100 fp16 matmul measured at 230 TFLOP/s by
  mli/transformers-benchmarks (published.yaml ``mli_microbench_summary_A100``), i.e. 0.737 of peak,
  instead of the catalog's 2025 MAMF figure (0.869).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster.perf.flops import sc21_eq3_flops
from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario

MATMUL_EFFICIENCY_2021 = 0.869


@dataclass(frozen=True)
class Case:
    """One published configuration: (id, layers, hidden, heads, gpus, tp, pp, batch, micro, TFLOP/s)."""

    id: str
    layers: int
    hidden: int
    heads: int
    gpus: int
    tp: int
    pp: int
    batch: int
    micro: int | None
    tflops: float

    @property
    def zero3(self) -> bool:
        """DeepSpeed ZeRO-3 without model parallelism (Table 2)."""
        return "zero3" in self.id


CASES = [
    Case("sc21_table1_1.7B", 24, 2304, 24, 32, 1, 1, 512, None, 137),
    Case("sc21_table1_3.6B", 30, 3072, 32, 64, 2, 1, 512, None, 138),
    Case("sc21_table1_7.5B", 36, 4096, 32, 128, 4, 1, 512, None, 142),
    Case("sc21_table1_18.4B", 40, 6144, 48, 256, 8, 1, 1024, None, 135),
    Case("sc21_table1_39.1B", 48, 8192, 64, 512, 8, 2, 1536, None, 138),
    Case("sc21_table1_76.1B", 60, 10240, 80, 1024, 8, 4, 1792, None, 140),
    Case("sc21_table1_145.6B", 80, 12288, 96, 1536, 8, 8, 2304, None, 148),
    Case("sc21_table1_310.1B", 96, 16384, 128, 1920, 8, 16, 2160, None, 155),
    Case("sc21_table1_529.6B", 105, 20480, 128, 2520, 8, 35, 2520, None, 163),
    Case("sc21_table1_1008.0B", 128, 25600, 160, 3072, 8, 64, 3072, None, 163),
    Case("sc21_table2_zero3_175B_384gpu", 96, 12288, 96, 384, 1, 1, 1536, 4, 144),
    Case("sc21_table2_zero3_175B_768gpu", 96, 12288, 96, 768, 1, 1, 1536, 2, 88),
    Case("sc21_table2_zero3_175B_1536gpu", 96, 12288, 96, 1536, 1, 1, 1536, 1, 44),
    Case("sc21_table2_zero3_530B_640gpu", 105, 20480, 128, 640, 1, 1, 2560, 4, 138),
    Case("sc21_table2_zero3_530B_1120gpu", 105, 20480, 128, 1120, 1, 1, 2240, 2, 98),
    Case("sc21_table2_zero3_530B_2240gpu", 105, 20480, 128, 2240, 1, 1, 2240, 1, 48),
    Case("sc21_table2_ptd_175B_384gpu", 96, 12288, 96, 384, 8, 12, 1536, 1, 153),
    Case("sc21_table2_ptd_175B_768gpu", 96, 12288, 96, 768, 8, 12, 1536, 1, 149),
    Case("sc21_table2_ptd_175B_1536gpu", 96, 12288, 96, 1536, 8, 12, 1536, 1, 141),
    Case("sc21_table2_ptd_530B_560gpu", 105, 20480, 128, 560, 8, 35, 2240, 1, 171),
    Case("sc21_table2_ptd_530B_1120gpu", 105, 20480, 128, 1120, 8, 35, 2240, 1, 167),
    Case("sc21_table2_ptd_530B_2240gpu", 105, 20480, 128, 2240, 8, 35, 2240, 1, 159),
]
VOCAB, SEQ = 51200, 2048


def _micro(case: Case) -> int:
    if case.micro is not None:
        return case.micro
    if case.pp > 1:
        return 1
    per_replica = case.batch // (case.gpus // case.tp)
    return next(b for b in (4, 2, 1) if per_replica % b == 0)


def _schedule(case: Case) -> dict[str, Any]:
    if case.pp == 1:
        return {"schedule": "1f1b"}
    for v in (2, 3, 4, 5, 6, 7):
        if case.layers % (case.pp * v) == 0:
            return {"schedule": "interleaved", "virtual_stages": v}
    return {"schedule": "1f1b"}


def scenario(case: Case, execution: dict[str, Any] | None = None, **parallelism: Any) -> Scenario:
    """The simcluster scenario of ``case`` (see the module docstring for the fixed choices)."""
    execution = execution or {}
    model = {"name": case.id, "layers": case.layers, "hidden": case.hidden, "heads": case.heads,
             "vocab": VOCAB, "seq_len": SEQ, "tied_embeddings": True}
    topology = {"preset": "dgx-a100-80gb",
                "accelerator": {"preset": "a100-sxm-80gb",
                                "matmul_efficiency": {"fp16": MATMUL_EFFICIENCY_2021}}}
    par = {"tp": case.tp, "pp": case.pp, "global_batch": case.batch, "micro_batch": _micro(case),
           "recompute": "full", "zero_stage": 3 if case.zero3 else 0,
           **_schedule(case), **parallelism}
    return load_scenario({"name": case.id, "model": model, "precision": "fp16",
                          "execution": {"flash_attention": False, "overlap_grad_reduce": False,
                                        **execution},
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
