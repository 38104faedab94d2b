"""Memory beyond the model state and stored activations: what real training processes also hold.

Split out of :mod:`.memory` (issue 13, item 3: memory that errs on the safe side). Each term has a
default from a public measurement or source, and an ``execution`` key to refine it:

- **CUDA context** (``execution.cuda_context_GiB``): the CUDA context with every kernel loaded,
  666,632,192 bytes measured by PyTorch with ``CUDA_MODULE_LOADING=DEFAULT`` (pytorch/pytorch#86509;
  287 MB with lazy loading before any kernel runs: a training run loads most of its kernels), plus
  two cuBLASLt workspaces of 32 MiB (PyTorch's size on Hopper, 4 MiB on Ampere: pytorch#120925),
  one per stream that runs GEMMs (compute and communication-overlap streams).
- **NCCL buffers** (``execution.nccl_buffsize_bytes``): per communicator, 544 MiB for a 2-rank
  group and 688 MiB for a larger one, measured on 4 x A100 NVLink with PyTorch after one
  all-reduce at the default ``NCCL_BUFFSIZE`` of 4 MiB (NVIDIA/nccl#964; the maintainers: memory
  grows linearly with communicators and channels and no longer with the group size beyond two
  nodes, nccl#986). The buffers per channel and peer are the SIMPLE protocol's ``NCCL_BUFFSIZE``
  plus LL128 (120 x 640 x 8 steps x 8 B) and LL (8 x 512 x 8 steps x 16 B) buffers
  (``src/include/device.h``), so a communicator scales by ``(buffsize + LL128 + LL) / (4 MiB +
  LL128 + LL)``. All-to-all (expert parallelism) connects every peer: 3.28 GB more for 7 peers on
  8 x H100 (nccl#1685), counted per peer. :func:`communicators` lists the groups a Megatron layout
  uses on a stage.
- **Logits at the loss** (last stage): Megatron casts the vocab-parallel logits to fp32 for its
  cross entropy (``output.float()`` before ``vocab_parallel_cross_entropy``); while the loss is
  formed the 16-bit logits and an fp32 working copy exist besides the stored fp32 softmax (counted
  in the activations): ``(w + 4) * s*b*V/t`` bytes with 16-bit width ``w`` (``4*s*b*V/t`` in fp32).
- **Embedding gradient** (first stage): the embedding's backward writes a dense gradient of the
  vocab-parallel table, ``w * V*h/t`` bytes, before it is added to the main gradient buffer.
- **Allocator reserve** (``execution.allocator_fragmentation``): PyTorch's caching allocator
  reserves more than it allocates; the fragmentation ``f = (reserved - allocated) / reserved`` is
  15% on average (up to 33%) over eight LLM training runs on A100 80 GB (GMLake, ASPLOS'24,
  Guo et al., arXiv 2401.08156). Static buffers (weights, gradient and optimizer buffers, allocated
  once) do not fragment; the reserve applies to what is allocated and freed every micro-batch
  (activations and the transients above): ``reserved = allocated / (1 - f)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.perf.cache import memoised
from simcluster.spec.scenario import Scenario
from simcluster.units import MiB

__all__ = [
    "A2A_PEER_BYTES",
    "CUBLAS_WORKSPACE_BYTES",
    "CUDA_CONTEXT_BYTES",
    "DEFAULT_ALLOCATOR_FRAGMENTATION",
    "DEFAULT_NCCL_BUFFSIZE",
    "LL128_BUFFER_BYTES",
    "LL_BUFFER_BYTES",
    "NCCL_COMM_BYTES_LARGE",
    "NCCL_COMM_BYTES_PAIR",
    "WORST_ALLOCATOR_FRAGMENTATION",
    "Communicators",
    "StageOverheads",
    "allocator_reserve_bytes",
    "communicators",
    "embedding_grad_bytes",
    "logits_transient_bytes",
    "nccl_bytes",
]

#: CUDA context with every kernel module loaded (pytorch#86509, ``CUDA_MODULE_LOADING=DEFAULT``).
CUDA_CONTEXT_BYTES = 666_632_192
#: cuBLASLt workspace PyTorch allocates per handle and stream on Hopper (pytorch#120925).
CUBLAS_WORKSPACE_BYTES = 32 * MiB
#: Default ``execution.cuda_context_GiB`` in bytes: the context and two GEMM streams' workspaces.
DEFAULT_CUDA_CONTEXT = CUDA_CONTEXT_BYTES + 2 * CUBLAS_WORKSPACE_BYTES

#: ``NCCL_BUFFSIZE`` default (NCCL environment variables documentation).
DEFAULT_NCCL_BUFFSIZE = 4 * MiB
#: LL128 buffer per channel and peer: NCCL_LL128_ELEMS_PER_THREAD x NCCL_LL128_MAX_NTHREADS x
#: NCCL_STEPS x 8 bytes (``src/include/device.h``).
LL128_BUFFER_BYTES = 120 * 640 * 8 * 8
#: LL buffer per channel and peer: NCCL_LL_LINES_PER_THREAD x NCCL_LL_MAX_NTHREADS x NCCL_STEPS x
#: sizeof(ncclLLFifoLine) (``src/include/device.h``).
LL_BUFFER_BYTES = 8 * 512 * 8 * 16
#: One 2-rank communicator at the default NCCL_BUFFSIZE, measured (nccl#964).
NCCL_COMM_BYTES_PAIR = 544 * MiB
#: One communicator of more than 2 ranks at the default NCCL_BUFFSIZE, measured (nccl#964).
NCCL_COMM_BYTES_LARGE = 688 * MiB
#: All-to-all: buffers per connected peer, 3.28 GB for 7 peers on 8 x H100 (nccl#1685).
A2A_PEER_BYTES = 3.28e9 / 7

#: Caching-allocator fragmentation, (reserved - allocated) / reserved: GMLake's average.
DEFAULT_ALLOCATOR_FRAGMENTATION = 0.15
#: The largest fragmentation of GMLake's eight LLM training runs (arXiv 2401.08156: "up to 33%"):
#: the sweep's default headroom keeps a layout fitting at this fragmentation, not only at the mean.
WORST_ALLOCATOR_FRAGMENTATION = 0.33


@dataclass(frozen=True, slots=True)
class Communicators:
    """NCCL communicators one GPU of a stage uses: 2-rank and larger groups, all-to-all peers."""

    pairs: int
    large: int
    a2a_peers: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StageOverheads:
    """The overhead parts of one stage, bytes (their sum is the stage's ``overhead``)."""

    cuda_context: float
    nccl: float
    logits: float
    embedding_grad: float
    allocator: float

    @property
    def total(self) -> float:
        """Sum of the parts."""
        return self.cuda_context + self.nccl + self.logits + self.embedding_grad + self.allocator

    def as_dict(self) -> dict[str, float]:
        """The parts by name, bytes."""
        return {"cuda_context": self.cuda_context, "nccl": self.nccl, "logits": self.logits,
                "embedding_grad": self.embedding_grad, "allocator": self.allocator}


def communicators(scenario: Scenario, stage: int) -> Communicators:
    """NCCL communicators a GPU of ``stage`` uses in a Megatron-LM layout.

    Groups of size > 1 only (PyTorch creates a group's NCCL communicator at its first collective):
    tensor parallel (tp), data parallel with context parallel (gradient reduction and the
    distributed optimizer's gather, dp*cp), context parallel (cp, ring attention), pipeline (pp,
    batched send/recv over the pipeline group), the model-parallel group of the gradient-norm and
    overflow all-reduces (tp*pp), the embedding group of the first and last stage (tied embeddings
    with pp > 1), and with experts the expert-parallel all-to-all (ep), the expert data-parallel
    group (``tp*cp*dp/(expert_tp*ep)``) and, where its size differs from TP's, the expert-TP group.
    """
    par, model = scenario.parallelism, scenario.model
    end = stage in (0, par.pp - 1)
    return _communicators(par.tp, par.pp, par.cp, par.dp, (par.ep, par.etp),
                          model.tied_embeddings and end and par.pp > 1, model.moe is not None)


@memoised()
def _communicators(tp: int, pp: int, cp: int, dp: int, experts: tuple[int, int],
                   embedding: bool, moe: bool) -> Communicators:
    sizes = [tp, dp * cp, cp, pp, tp * pp, 2 if embedding else 1]
    a2a = 0
    if moe:
        ep, etp = experts
        sizes += [ep, tp * cp * dp // (etp * ep), etp if etp != tp else 1]
        a2a = ep - 1
    return Communicators(pairs=sum(1 for n in sizes if n == 2),
                         large=sum(1 for n in sizes if n > 2), a2a_peers=a2a)


def all_stage_nccl_bytes(scenario: Scenario) -> tuple[float, ...]:
    """:func:`nccl_bytes` of every pipeline stage's :func:`communicators` (memoised per layout
    shape: the first and last stages differ from the middle ones only by the embedding group)."""
    par, model = scenario.parallelism, scenario.model
    return _all_stage_nccl(par.tp, par.pp, par.cp, par.dp, (par.ep, par.etp),
                           model.tied_embeddings, model.moe is not None,
                           scenario.execution.nccl_buffsize_bytes)


@memoised()
def _all_stage_nccl(tp: int, pp: int, cp: int, dp: int, experts: tuple[int, int], tied: bool,
                    moe: bool, buffsize: float) -> tuple[float, ...]:
    ends = nccl_bytes(_communicators(tp, pp, cp, dp, experts, tied and pp > 1, moe), buffsize)
    if pp == 1:
        return (ends,)
    middle = nccl_bytes(_communicators(tp, pp, cp, dp, experts, False, moe), buffsize)
    return (ends,) + (middle,) * (pp - 2) + (ends,)


def nccl_bytes(comms: Communicators, buffsize: float) -> float:
    """NCCL buffer bytes of ``comms`` at ``NCCL_BUFFSIZE = buffsize``: the measured communicator
    sizes scaled by the per-connection buffers (module docstring)."""
    scale = ((buffsize + LL128_BUFFER_BYTES + LL_BUFFER_BYTES)
             / (DEFAULT_NCCL_BUFFSIZE + LL128_BUFFER_BYTES + LL_BUFFER_BYTES))
    return scale * (comms.pairs * NCCL_COMM_BYTES_PAIR + comms.large * NCCL_COMM_BYTES_LARGE
                    + comms.a2a_peers * A2A_PEER_BYTES)


def logits_transient_bytes(micro_batch: int, seq_len: int, vocab: int, tp: int,
                           width: int) -> float:
    """Last stage, at the loss: the ``width``-byte logits and an fp32 working copy,
    ``(width + 4) * s*b*V/t`` (only the fp32 copy, ``4*s*b*V/t``, when training in fp32)."""
    per_element = 4 if width >= 4 else width + 4
    return per_element * seq_len * micro_batch * vocab / tp


def embedding_grad_bytes(vocab: int, hidden: int, tp: int, width: int) -> float:
    """First stage: the embedding backward's dense ``width``-byte gradient of the vocab-parallel
    table, ``width * V*h/t``."""
    return width * vocab * hidden / tp


def allocator_reserve_bytes(dynamic: float, fragmentation: float) -> float:
    """Reserved minus allocated for ``dynamic`` allocated bytes: ``dynamic * f / (1 - f)``."""
    if not 0 <= fragmentation < 1:
        raise ValueError(f"fragmentation must be in [0, 1), got {fragmentation}")
    return dynamic * fragmentation / (1 - fragmentation)
