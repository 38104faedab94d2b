"""What training sees: kernels at the steady power state, and the activation memory of layer variants.

``steady``: the GPU is first held at its power limit (8192^3 bf16 GEMMs for a few seconds), then
each GEMM shape runs back to back for about a second and each layer's forward+backward for several
seconds; the rate of the last part of each run is the steady one (the burst rates of gpu_gemm and
gpu_layers ran partly on the boost headroom that a few hundred milliseconds of idle leaves).
``memvar``: activation memory per layer of a GPT layer with dropout (1-byte masks) and of a Llama
layer with grouped-query attention done natively by SDPA (``enable_gqa``) instead of repeat_kv.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch
from gpu_common import Sampler, Table, log
from gpu_gemm import _linear_fn
from gpu_layers import SHAPES, Layer, Shape
from torch import nn

STEADY_GEMMS = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 16384, 16384),
                (8192, 12288, 4096), (8192, 4096, 4096), (8192, 16384, 4096), (8192, 4096, 16384),
                (4096, 6144, 2048), (4096, 2048, 8192), (16384, 2048, 2048), (4096, 28672, 4096),
                (4096, 4096, 14336), (2048, 57344, 8192), (2048, 8192, 28672), (8192, 15360, 5120),
                (8192, 5120, 20480), (512, 12288, 4096), (512, 4096, 16384)]
STEADY_LAYERS = ("mpt-7b", "mpt-70b", "llama3-8b", "mpt-7b-32k")


def _busy(fn: object, seconds: float) -> tuple[float, int]:
    """Run ``fn`` back to back for ``seconds``; returns (ms per call over the last half, calls)."""
    calls, marks = 0, []
    t_end = time.time() + seconds
    while time.time() < t_end:
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        marks.append((e, calls))  # the event before calls number `calls`
        for _ in range(4):
            fn()  # type: ignore[operator]
        calls += 4
        if len(marks) % 8 == 0:  # keep the host at most 32 calls ahead of the clock
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    half = len(marks) // 2
    (e0, c0), (e1, c1) = marks[half], marks[-1]
    return e0.elapsed_time(e1) / max(c1 - c0, 1), calls


def run_steady(out: Path, sampler: Sampler, deadline: float) -> None:
    table = Table(out / "steady.csv")
    warm, _ = _linear_fn(8192, 8192, 8192, "bf16")
    _busy(warm, 5.0)
    for dtype in ("bf16", "fp8_tensor"):
        for m, n, k in STEADY_GEMMS:
            if time.time() > deadline:
                return
            try:
                fn, _ = _linear_fn(m, n, k, dtype)
                t0 = time.time()
                ms, calls = _busy(fn, 1.2)
                clk = sampler.window(t0 + 0.6, time.time())
                table.add({"what": "gemm", "name": f"{m}x{n}x{k}", "dtype": dtype, "ms": ms,
                           "tflops": 2.0 * m * n * k / ms / 1e9, "calls": calls,
                           "sm_MHz": clk["sm_MHz"], "power_W": clk["power_W"]})
            except Exception as exc:
                log(out, f"steady gemm {dtype} {m}x{n}x{k}: {exc!r}"[:300])
            torch.cuda.empty_cache()
    for shape in (s for s in SHAPES if s.name in STEADY_LAYERS):
        if time.time() > deadline:
            return
        try:
            _steady_layer(table, sampler, shape)
        except Exception as exc:
            log(out, f"steady layer {shape.name}: {exc!r}"[:300])
        torch.cuda.empty_cache()


def _stack(shape: Shape) -> nn.Sequential:
    with torch.device("cuda"):
        return nn.Sequential(*(Layer(shape) for _ in range(shape.layers))).to(torch.bfloat16)


def _steady_layer(table: Table, sampler: Sampler, shape: Shape) -> None:
    stack = _stack(shape)
    for layer in stack:
        layer.backend = torch.nn.attention.SDPBackend.CUDNN_ATTENTION  # type: ignore[assignment]
    x = torch.randn(shape.batch, shape.seq, shape.hidden, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    grad = torch.randn_like(x)

    def step() -> None:
        stack.zero_grad(set_to_none=True)
        x.grad = None
        stack(x).backward(grad)

    t0 = time.time()
    ms, calls = _busy(step, 6.0)
    clk = sampler.window(t0 + 3.0, time.time())
    table.add({"what": "layer", "name": shape.name, "dtype": "bf16/cudnn", "ms": ms / shape.layers,
               "tflops": float("nan"), "calls": calls, "sm_MHz": clk["sm_MHz"],
               "power_W": clk["power_W"]})


class _DropoutLayer(Layer):
    """The GPT layer with dropout p = 0.1 after attention and after the MLP (Megatron's places)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + nn.functional.dropout(self._attn(self.norm1(x)), 0.1, training=True)
        return x + nn.functional.dropout(self._mlp(self.norm2(x)), 0.1, training=True)


def run_memvar(out: Path, sampler: Sampler, deadline: float) -> None:
    table = Table(out / "memvar.csv")
    variants: list[tuple[str, Shape, type[Layer]]] = [
        ("gpt", SHAPES[1], Layer), ("gpt+dropout", SHAPES[1], _DropoutLayer),
        ("llama3-8b", SHAPES[7], Layer),
        ("llama3-8b-mha", dataclasses.replace(SHAPES[7], kv_heads=32), Layer),
    ]
    for name, shape, cls in variants:
        try:
            with torch.device("cuda"):
                layer = cls(shape).to(torch.bfloat16)
            x = torch.randn(shape.batch, shape.seq, shape.hidden, device="cuda",
                            dtype=torch.bfloat16, requires_grad=True)
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            y = layer(x)
            saved = torch.cuda.memory_allocated() - before - y.numel() * y.element_size()
            tokens_hidden = shape.batch * shape.seq * shape.hidden
            table.add({"variant": name, "hidden": shape.hidden, "seq": shape.seq,
                       "batch": shape.batch, "kv_heads": shape.kv_heads, "ffn": shape.ffn,
                       "saved_MiB": saved / 2**20, "bytes_per_token_hidden": saved / tokens_hidden})
            del y, layer, x
        except Exception as exc:
            log(out, f"memvar {name}: {exc!r}"[:300])
        torch.cuda.empty_cache()
