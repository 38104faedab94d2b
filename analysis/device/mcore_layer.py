"""Megatron-Core's MoE layer with grouped expert GEMMs, and whole Megatron-Core transformer layers,
on one GPU: kernels launched, host issue time and wall time of one forward+backward.

    pip install --no-deps megatron_core-0.16.1-*.whl   # the wheel from PyPI (no network there)
    PYTHONUNBUFFERED=1 python3 analysis/device/mcore_layer.py --out DIR [--cpu]

``mcore_moe.py`` measured ``MoELayer`` with ``SequentialMLP`` (a loop of per-expert MLPs, 17
kernels per local expert). Megatron-Bridge's MoE recipes run grouped expert GEMMs. Their kernel,
``grouped_gemm.ops.gmm`` (fanshiqing/grouped_gemm, a CUDA extension built from source), is not on
PyPI, so this script registers a module of that name whose ``gmm`` is PyTorch's own grouped GEMM
(``torch._grouped_mm``, what torchtitan's MoE runs) and builds the legacy ``GroupedMLP``
(``moe_grouped_gemm=True, moe_use_legacy_grouped_gemm=True``): one grouped kernel per expert GEMM,
as in Transformer Engine's ``TEGroupedMLP``. Everything else is megatron-core 0.16.1's local spec
(no Transformer Engine: no fused router, permute or attention kernels).

Rows (``kind``):
- ``moe``: the MoE MLP alone at Qwen3-30B-A3B's dimensions (hidden 2048, expert FFN 768), local
  experts and top-k keeping Qwen3's tokens per expert (16 top-1 is the EP-8 share), 1k-16k tokens;
- ``layer_moe``: a whole Qwen3-30B-A3B transformer layer (RMSNorm, QK-norm, GQA 32/4 heads of 128,
  RoPE, unfused core attention, the MoE MLP of the EP-8 share), 1k and 4k tokens;
- ``layer_dense``: a whole Llama 3 8B layer (hidden 4096, GQA 32/8, SwiGLU 14336), 1k and 4k tokens;
- ``tiny_add``: the host's floor, one in-place ``add_`` of 16 elements issued 20,000 times (the
  dispatcher and the launch, no module code): what this machine's CPU issues per kernel at best.

Host time is 10 calls issued without synchronisation, over 10 (the all-to-all dispatcher copies the
expert counts to the host every forward, so part of the GPU's time shows in it); wall time adds the
final synchronisation. Kernels are counted with ``torch.profiler``. ``--cpu`` runs a small smoke
test on the CPU (gloo), to check the script where no GPU is.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import types
from pathlib import Path

import torch
import torch.nn.functional as nnf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mcore_moe

MOE = ((8, 1), (16, 1), (32, 2), (128, 8))
MOE_TOKENS = (1024, 4096, 16384)
LAYER_TOKENS = (1024, 4096)


def _gmm(a: torch.Tensor, b: torch.Tensor, batch_sizes: torch.Tensor,
         trans_b: bool = False) -> torch.Tensor:
    """``grouped_gemm.ops.gmm`` on ``torch._grouped_mm``: rows of ``a`` in expert order,
    ``batch_sizes`` rows per expert (a host tensor), ``b`` ``[experts, k, n]`` (``[e, n, k]``
    with ``trans_b``)."""
    if a.device.type == "cpu":  # the smoke test: a loop (torch._grouped_mm is CUDA only)
        bb = b.transpose(1, 2) if trans_b else b
        outs = [part @ bb[i] for i, part in enumerate(torch.split(a, batch_sizes.tolist()))]
        return torch.cat(outs)
    offs = torch.cumsum(batch_sizes, 0).to(device=a.device, dtype=torch.int32, non_blocking=True)
    bb = b.transpose(1, 2) if trans_b else b
    if COLUMN_MAJOR:
        bb = bb.transpose(1, 2).contiguous().transpose(1, 2)
    return torch._grouped_mm(a, bb, offs=offs)


#: Whether the grouped kernel needs column-major weights (one copy per call); set by ``probe``.
COLUMN_MAJOR = False


def probe() -> None:
    """Find once whether ``torch._grouped_mm`` takes Megatron-Core's row-major ``[e, k, n]``."""
    global COLUMN_MAJOR
    a = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4, 256, 128, device="cuda", dtype=torch.bfloat16)
    try:
        _gmm(a, b, torch.tensor([16, 16, 16, 16]))
    except RuntimeError as exc:
        print(f"row-major weights refused ({exc!r:.200}): copying them column-major", flush=True)
        COLUMN_MAJOR = True


def install_grouped_gemm() -> None:
    ops = types.SimpleNamespace(gmm=_gmm)
    sys.modules["grouped_gemm"] = types.SimpleNamespace(ops=ops)  # type: ignore[assignment]


def config(kind: str, experts: int, top_k: int, cpu: bool) -> object:
    from megatron.core.transformer.transformer_config import TransformerConfig

    common = {"num_layers": 1, "add_bias_linear": False, "gated_linear_unit": True,
                  "activation_func": nnf.silu, "bf16": True, "normalization": "RMSNorm",
                  "params_dtype": torch.bfloat16,
                  "use_cpu_initialization": cpu, "kv_channels": 128, "hidden_dropout": 0.0,
                  "attention_dropout": 0.0}
    if kind == "layer_dense":
        return TransformerConfig(hidden_size=4096, num_attention_heads=32, num_query_groups=8,
                                 ffn_hidden_size=14336, **common)
    return TransformerConfig(
        hidden_size=2048, num_attention_heads=32, num_query_groups=4, ffn_hidden_size=6144,
        qk_layernorm=True, num_moe_experts=experts, moe_router_topk=top_k,
        moe_ffn_hidden_size=768, moe_token_dispatcher_type="allgather" if cpu else "alltoall",
        moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
        moe_router_pre_softmax=top_k == 1, moe_grouped_gemm=True,
        moe_use_legacy_grouped_gemm=True, **common)


def build(kind: str, experts: int, top_k: int, cpu: bool) -> torch.nn.Module:
    mcore_moe.patch_moe_utils()
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module

    cfg = config(kind, experts, top_k, cpu)
    moe = kind != "layer_dense"
    spec = get_gpt_layer_local_spec(num_experts=experts if moe else None, moe_grouped_gemm=moe,
                                    qk_layernorm=moe, moe_use_legacy_grouped_gemm=moe,
                                    normalization="RMSNorm")
    if kind == "moe":
        module = build_module(spec.submodules.mlp, config=cfg)
        module.set_layer_number(1)
    else:
        module = build_module(spec, config=cfg, layer_number=1)
    return module if cpu else module.cuda()


def layer_step(layer: torch.nn.Module, kind: str, tokens: int, cpu: bool) -> object:
    dtype, device = torch.bfloat16, ("cpu" if cpu else "cuda")
    hidden = 4096 if kind == "layer_dense" else 2048
    x = torch.randn(tokens, 1, hidden, dtype=dtype, device=device, requires_grad=True)
    grad = torch.randn_like(x)
    rope = None if kind == "moe" else rotary(tokens, 128, device)
    mask = None  # causal: Megatron-Core builds the mask on the GPU
    if cpu:
        mask = torch.triu(torch.ones(tokens, tokens), diagonal=1).bool()[None, None]

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out = layer(x) if rope is None else layer(x, attention_mask=mask, rotary_pos_emb=rope)
        out[0].backward(grad)

    return step


def rotary(tokens: int, dim: int, device: str) -> torch.Tensor:
    """Megatron-Core's rotary table ``[s, 1, 1, d]`` (RotaryEmbedding.forward, base 10000)."""
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float32), inv)
    return torch.cat([freqs, freqs], dim=-1)[:, None, None, :].to(device)


def cases(cpu: bool) -> list[tuple[str, int, int, tuple[int, ...]]]:
    if cpu:
        return [("moe", 8, 1, (256,)), ("layer_moe", 16, 1, (128,)), ("layer_dense", 0, 0, (128,))]
    rows = [("moe", e, k, MOE_TOKENS) for e, k in MOE]
    return [*rows, ("layer_moe", 16, 1, LAYER_TOKENS), ("layer_dense", 0, 0, LAYER_TOKENS)]


def launch_rate(cpu: bool) -> dict[str, float]:
    """The host's floor: issue time of one tiny eager ``add`` (the PyTorch dispatcher and the
    launch, no Python module code), in us, over 20,000 calls."""
    device = "cpu" if cpu else "cuda"
    a = torch.ones(16, device=device)
    for _ in range(200):
        a.add_(1.0)
    mcore_moe._sync(cpu)
    begin = time.perf_counter()
    for _ in range(20000):
        a.add_(1.0)
    issued = time.perf_counter() - begin
    mcore_moe._sync(cpu)
    return {"host_ms": issued / 20000 * 1e3, "wall_ms": (time.perf_counter() - begin) / 20000 * 1e3,
            "kernels": 1.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    install_grouped_gemm()
    if args.cpu:  # Megatron-Core's router moves its weight to the current CUDA device
        torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]
        import contextlib

        from megatron.core import tensor_parallel  # its dropout RNG tracker needs CUDA
        tensor_parallel.get_cuda_rng_tracker().fork = (  # type: ignore[method-assign]
            lambda *a, **k: contextlib.nullcontext())
    mcore_moe.init(args.cpu)
    if not args.cpu:
        probe()
    import megatron.core

    with (args.out / "mcore_layer.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["megatron_core", "kind", "local_experts", "top_k", "tokens",
                         "kernels_fwd_bwd", "host_fwd_bwd_ms", "wall_fwd_bwd_ms"])
        m = launch_rate(args.cpu)
        writer.writerow([megatron.core.__version__, "tiny_add", 0, 0, 16, 1,
                         f"{m['host_ms']:.5f}", f"{m['wall_ms']:.5f}"])
        print("tiny_add", m, flush=True)
        for kind, experts, top_k, token_list in cases(args.cpu):
            try:
                layer = build(kind, experts, top_k, args.cpu)
            except Exception as exc:  # keep the other configurations
                import traceback
                traceback.print_exc()
                print(f"build {kind} {experts}: {exc!r}"[:400], flush=True)
                continue
            for tokens in token_list:
                try:
                    m = mcore_moe.time_step(layer_step(layer, kind, tokens, args.cpu), args.cpu)
                except Exception as exc:  # keep the other rows
                    import traceback
                    traceback.print_exc()
                    print(f"{kind} {experts}x top-{top_k} {tokens}: {exc!r}"[:400], flush=True)
                    continue
                writer.writerow([megatron.core.__version__, kind, experts, top_k, tokens,
                                 int(m["kernels"]), f"{m['host_ms']:.4f}", f"{m['wall_ms']:.4f}"])
                f.flush()
                print(kind, experts, top_k, tokens, m, flush=True)
            del layer
            if not args.cpu:
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
