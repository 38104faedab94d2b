"""Megatron-Core's own MoE layer on one GPU: kernels launched, host issue time and GPU time of one
forward+backward, by local experts and tokens.

    pip install --no-deps megatron_core-0.16.1-*.whl   # the wheel from PyPI (no network there)
    PYTHONUNBUFFERED=1 python3 analysis/device/mcore_moe.py --out DIR [--cpu]

The layer is ``MoELayer`` from megatron-core 0.16.1 built from its own local spec
(``get_gpt_layer_local_spec(num_experts=E)``: Megatron-Core modules only, no Transformer Engine,
so no fused permute or router kernels): the top-k router with its auxiliary load-balancing loss,
the all-to-all token dispatcher (a world of one: the all-to-alls are copies), and ``SequentialMLP``
experts (a loop of per-expert SwiGLU MLPs). Qwen3-30B-A3B's dimensions (hidden 2048, expert FFN
768). Local experts and top-k keep Qwen3's tokens per expert (``tokens x 8 / 128``) where they can:
16 experts top-1 is the EP-8 share, 8 top-1 EP-16, 32 top-2 EP-4, 128 top-8 the whole layer.
Kernels are counted with ``torch.profiler``; host time is 8 calls issued without synchronisation.
``--cpu`` runs a small smoke test on the CPU (gloo), to check the script where no GPU is.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as nnf

#: (local experts, top-k) per configuration; tokens per micro-batch.
EXPERTS = ((8, 1), (16, 1), (32, 2), (64, 4), (128, 8))
TOKENS = (1024, 4096, 16384)


def init(cpu: bool) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)  # a world of one: no NCCL
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
    if not cpu:
        from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(1234)


def patch_moe_utils() -> None:
    """megatron-core 0.16.1 tests these Transformer Engine names without defining them."""
    from megatron.core.transformer.moe import moe_utils

    for name in ("te_general_gemm", "fused_permute", "fused_unpermute", "fused_permute_with_probs",
                 "fused_sort_chunks_by_index", "fused_sort_chunks_by_index_with_probs",
                 "fused_topk_with_score_function", "fused_compute_score_for_moe_aux_loss",
                 "fused_moe_aux_loss"):
        if not hasattr(moe_utils, name):  # 0.16.1 tests these names without Transformer Engine
            setattr(moe_utils, name, None)


def build(experts: int, top_k: int, cpu: bool) -> torch.nn.Module:
    patch_moe_utils()
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=1, hidden_size=2048, num_attention_heads=32, ffn_hidden_size=6144,
        num_moe_experts=experts, moe_router_topk=top_k, moe_ffn_hidden_size=768,
        moe_token_dispatcher_type="allgather" if cpu else "alltoall",
        moe_router_load_balancing_type="aux_loss",
        moe_aux_loss_coeff=1e-3, moe_router_pre_softmax=top_k == 1, moe_grouped_gemm=False,
        add_bias_linear=False,
        gated_linear_unit=True, activation_func=nnf.silu, bf16=not cpu,
        params_dtype=torch.float32 if cpu else torch.bfloat16, use_cpu_initialization=cpu,
        normalization="RMSNorm")
    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False)
    layer = build_module(spec.submodules.mlp, config=config)
    layer.set_layer_number(1)
    return layer if cpu else layer.cuda()


def _sync(cpu: bool) -> None:
    if not cpu:
        torch.cuda.synchronize()


def measure(layer: torch.nn.Module, tokens: int, cpu: bool) -> dict[str, float]:
    dtype, device = (torch.float32, "cpu") if cpu else (torch.bfloat16, "cuda")
    x = torch.randn(tokens, 1, 2048, dtype=dtype, device=device, requires_grad=True)
    grad = torch.randn_like(x)

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out, _ = layer(x)
        out.backward(grad)

    return time_step(step, cpu)


def time_step(step: Callable[[], None], cpu: bool) -> dict[str, float]:
    """Host issue time, wall time (ms) and kernels of one call of ``step``, after 3 warm-ups."""
    for _ in range(3):
        step()
    _sync(cpu)
    reps = 2 if cpu else 10
    begin = time.perf_counter()
    for _ in range(reps):
        step()
    issued = time.perf_counter() - begin
    _sync(cpu)
    wall = time.perf_counter() - begin
    return {"host_ms": issued / reps * 1e3, "wall_ms": wall / reps * 1e3,
            "kernels": _kernels(step, cpu)}


def _kernels(step: object, cpu: bool) -> float:
    from torch.profiler import ProfilerActivity, profile

    activity = ProfilerActivity.CPU if cpu else ProfilerActivity.CUDA
    with profile(activities=[activity]) as prof:
        step()  # type: ignore[operator]
        _sync(cpu)
    kind = "CPU" if cpu else "CUDA"
    return float(sum(1 for e in prof.events() if e.device_type.name == kind))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    init(args.cpu)
    path = args.out / "mcore_moe.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["megatron_core", "local_experts", "top_k", "tokens", "tokens_per_expert",
                         "kernels_fwd_bwd", "host_fwd_bwd_ms", "wall_fwd_bwd_ms"])
        import megatron.core

        for experts, top_k in EXPERTS[:2] if args.cpu else EXPERTS:
            layer = build(experts, top_k, args.cpu)
            for tokens in TOKENS[:1] if args.cpu else TOKENS:
                try:
                    m = measure(layer, tokens, args.cpu)
                except Exception as exc:
                    import traceback
                    traceback.print_exc()
                    print(f"{experts}x top-{top_k} {tokens}: {exc!r}"[:400], flush=True)
                    continue
                writer.writerow([megatron.core.__version__, experts, top_k, tokens,
                                 tokens * top_k // experts, int(m["kernels"]),
                                 f"{m['host_ms']:.4f}", f"{m['wall_ms']:.4f}"])
                f.flush()
                print(experts, top_k, tokens, m, flush=True)
            del layer
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
