"""Megatron-LM v1 (September 2020) scaling runs as simcluster scenarios: measured iteration times.

Source: NVIDIA/Megatron-LM README scaling tables of September 2020 (``images/tables.tex`` @5281919,
present until @23632ee5; ids below, docs/catalog.md): GPT-2 style models (vocabulary 51,200,
sequence 1024, FFN 4h) with tensor parallelism inside one DGX-2 (16 x V100, batch 8) or one DGX
A100 (batch 16), and 128-way data parallelism of the A100 runs (global batch 2048). Every row
publishes its iteration time, so the comparison is in seconds, never through a FLOP convention; the
published TFLOP/s match the SC'21 Eq. 3 with the recompute pass, so the runs used activation
checkpointing.

Fixed for every row: ``--fp16``, full recompute (``--checkpoint-activations`` in the README's
example arguments), no flash attention, no gradient-accumulation fusion (one micro-batch per
replica: nothing to accumulate), no distributed optimizer; the data-parallel runs use PyTorch DDP,
whose gradient all-reduce overlaps backward (the README's distributed examples pass ``--DDP-impl
torch``; it credits torch DDP with 8.3B-on-512-GPU scaling rising from 60% to 76%); DGX A100 nodes
of 2020 (A100 40 GB) with 8 x HDR 200 Gb/s (inter-node fabric not stated), the DGX-2 with its
NVSwitch (``topologies/dgx-2.yaml``). Catalog calibration as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario

VOCAB, SEQ = 51200, 1024


@dataclass(frozen=True)
class V1Case:
    """One published run: model shape, GPUs, TP, global batch and the iteration time (ms)."""

    id: str
    layers: int
    hidden: int
    heads: int
    gpus: int
    tp: int
    batch: int
    iteration_ms: float

    @property
    def topology(self) -> str:
        """The node the run used."""
        return "dgx-2" if "v100" in self.id else "dgx-a100-40gb"


CASES = [
    V1Case("megatron_v1_mp_weak_1B_dgx2_v100", 24, 1920, 15, 1, 1, 8, 1121),
    V1Case("megatron_v1_mp_weak_2B_dgx2_v100", 30, 2304, 18, 2, 2, 8, 1093),
    V1Case("megatron_v1_mp_weak_4B_dgx2_v100", 36, 3072, 24, 4, 4, 8, 1238),
    V1Case("megatron_v1_mp_weak_8B_dgx2_v100", 42, 4096, 32, 8, 8, 8, 1407),
    V1Case("megatron_v1_mp_weak_1B_dgx_a100", 24, 1920, 15, 1, 1, 16, 1076),
    V1Case("megatron_v1_mp_weak_2B_dgx_a100", 30, 2304, 18, 2, 2, 16, 1026),
    V1Case("megatron_v1_mp_weak_4B_dgx_a100", 36, 3072, 24, 4, 4, 16, 1162),
    V1Case("megatron_v1_mp_weak_8B_dgx_a100", 42, 4096, 32, 8, 8, 16, 1343),
    V1Case("megatron_v1_dp128_1B_dgx_a100", 24, 1920, 15, 128, 1, 2048, 1153),
    V1Case("megatron_v1_dp128_2B_dgx_a100", 30, 2304, 18, 256, 2, 2048, 1101),
    V1Case("megatron_v1_dp128_4B_dgx_a100", 36, 3072, 24, 512, 4, 2048, 1242),
    V1Case("megatron_v1_dp128_8B_dgx_a100", 42, 4096, 32, 1024, 8, 2048, 1380),
]


def scenario(case: V1Case) -> Scenario:
    """The simcluster scenario of ``case`` (see the module docstring for the fixed choices)."""
    per_node = 16 if case.topology == "dgx-2" else 8
    nodes = max(1, case.gpus // per_node)
    model = {"name": case.id, "layers": case.layers, "hidden": case.hidden, "heads": case.heads,
             "vocab": VOCAB, "seq_len": SEQ, "tied_embeddings": True}
    dp = case.gpus // case.tp
    topology: dict[str, object] = {"preset": case.topology}
    if case.gpus < per_node:  # the single-node runs used 1 to 8 GPUs of the box
        topology.update(gpus_per_node=case.gpus,
                        host={"gpus_per_pcie_switch": min(2, case.gpus)})
    cluster = {"topology": topology, "nodes": nodes}
    return load_scenario({
        "name": case.id, "model": model, "precision": "fp16",
        "execution": {"stack": "megatron-2021", "overlap_grad_reduce": case.gpus > case.tp},
        "cluster": cluster,
        "parallelism": {"tp": case.tp, "pp": 1, "global_batch": case.batch,
                        "micro_batch": case.batch // dp, "recompute": "full", "zero_stage": 0}})


def predicted_ms(case: V1Case, engine: str = "analytical") -> float:
    """simcluster's iteration time of ``case`` in milliseconds."""
    return simulate(scenario(case), engine=engine).step.iteration_time_s * 1e3


def table() -> list[tuple[str, float, float, float]]:
    """(id, published, analytical, DES) iteration time in ms for every case."""
    return [(c.id, c.iteration_ms, predicted_ms(c), predicted_ms(c, "des")) for c in CASES]
