"""Caching-allocator fragmentation of an eager Llama training loop, with PyTorch's default
allocator or with ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (what torchtitan's
run_llama_train.sh sets).

    python3 analysis/device/alloc_fragmentation.py --out FILE.csv
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
        python3 analysis/device/alloc_fragmentation.py --out FILE.csv

One process per setting (the allocator reads the variable at CUDA start). The loop: a stack of
eager Llama 2 13B layers (gpu_layers.Layer: RMSNorm, RoPE, SwiGLU; h 5120, 40 heads, ffn 13824),
micro-batch 2 x 4096 tokens, a 32,000-token LM head with an fp32 cross-entropy, fused Adam on
bf16 parameters; gradients set to None every step. After warm-up steps the peak allocated and
peak reserved bytes give the fragmentation ``f = (reserved - allocated) / reserved`` that
simcluster's ``execution.allocator_fragmentation`` means (perf/memory_overheads.py).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_layers import Layer, Shape

SHAPE = Shape("llama2-13b", "llama", 5120, 40, 40, 13824, 4096, 2, 8)
VOCAB = 32000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, default=SHAPE.layers)
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    with torch.device("cuda"):
        blocks = nn.Sequential(*(Layer(SHAPE) for _ in range(args.layers)))
        head = nn.Linear(SHAPE.hidden, VOCAB, bias=False)
        model = nn.ModuleDict({"blocks": blocks, "head": head}).to(torch.bfloat16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-5, fused=True)
    tokens = torch.randint(0, VOCAB, (SHAPE.batch * SHAPE.seq,), device="cuda")
    begin = time.time()
    for step in range(args.steps):
        if step == 2:  # the peaks of the steady steps only
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        x = torch.randn(SHAPE.batch, SHAPE.seq, SHAPE.hidden, device="cuda", dtype=torch.bfloat16)
        logits = head(blocks(x)).view(-1, VOCAB)
        loss = nn.functional.cross_entropy(logits.float(), tokens)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    allocated, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    row = {"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"),
           "layers": args.layers, "steps": args.steps, "peak_allocated_GiB": allocated / 2**30,
           "peak_reserved_GiB": reserved / 2**30,
           "fragmentation": (reserved - allocated) / reserved, "seconds": time.time() - begin,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    new = not args.out.exists()
    with args.out.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)
    print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
