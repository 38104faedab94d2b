"""The distributed optimizer's parameter all-gather (ZeRO-1 and ZeRO-2), and when it is exposed.

With ZeRO >= 1 each data-parallel rank updates only its shard of the weights, so after the
optimizer step the ranks all-gather the updated 16-bit weights before the next forward can use them
(Rajbhandari et al. SC'20 section 5; Megatron-LM's distributed optimizer,
``megatron/core/optimizer/distrib_optimizer.py``). The gradient reduce-scatter before the step can
hide behind the backward; this all-gather cannot, because it needs the step's result.

- Without overlap (``execution.overlap_param_gather: false``: Megatron-LM's default, and DeepSpeed
  ZeRO-1/2, whose ``step()`` all-gathers the partitions synchronously) the next forward waits for
  the whole gather. A pipeline stage ``i > 0`` waits anyway for its first activation, ``i`` stages'
  forwards of the first micro-batch, which hides that much of its own gather.
- With ``--overlap-param-gather`` (Megatron-Core; NeMo 2024 recipes set it) the gathers are
  issued asynchronously when the step starts and the forward of a bucket's layers waits only for
  its bucket: the first micro-batch's forward is the same two-machine flow shop as ZeRO-3's
  prefetch (:func:`simcluster.perf.zero3.pass_exposed_s`): the first layer's gather is exposed,
  the others only by what they exceed that layer's forward.

Simplification (stated): the overlapped gathers are counted per layer, one collective each, issued
back to back in layer order (Megatron's buckets hold about one large layer); the embedding and
output layer are spread over the stage's layers. The DES runs exactly this; the closed form takes
the first chunk's pass and counts the later chunks' gathers as hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.perf.collectives import collective_time
from simcluster.perf.comm_plan import ACT_BYTES, Groups
from simcluster.perf.zero3 import pass_exposed_s
from simcluster.spec.scenario import Scenario


@dataclass(frozen=True, slots=True)
class ParamGather:
    """One stage's parameter all-gather alone on idle links, seconds."""

    total_s: float  # every parameter of the stage in one collective (the synchronous gather)
    layer_s: float  # one layer's share as its own collective (the overlapped, per-layer gathers)
    overlapped: bool  # execution.overlap_param_gather


def param_gather(s: Scenario, g: Groups, held_params: float, layers: int) -> ParamGather | None:
    """The all-gather of the ``held_params`` a stage of ``layers`` layers holds; None unless ZeRO-1/2
    with data parallelism."""
    if g.dp is None or s.parallelism.zero_stage not in (1, 2) or held_params <= 0:
        return None
    width = ACT_BYTES[s.precision]
    total = collective_time("all_gather", held_params * width, g.dp).time_s
    layer = collective_time("all_gather", held_params / max(layers, 1) * width, g.dp).time_s
    return ParamGather(total, layer, s.execution.overlap_param_gather)


def gather_exposed_s(pg: ParamGather | None, chunk_layers: tuple[int, ...], forward_s: float,
                     stage: int, share: float = 0.0) -> float:
    """Seconds of ``pg`` the stage's compute waits for, once per step.

    ``chunk_layers``: layers of each local virtual chunk; ``forward_s``: one micro-batch's forward
    over all of them; ``stage``: the pipeline stage, whose first activation arrives after
    ``stage`` chunk forwards (every stage's gathers start with the step, so that much hides).
    Overlapped, the first chunk's first forward is the flow shop; the later chunks' gathers finish
    while the first chunk runs its other micro-batches (assumed hidden). A layer's forward beside
    the gathers runs ``1 + share`` times longer for the SMs they hold (:mod:`.kernels.comm_sms`), which
    is as much more time for the next layer's gather to arrive in.
    """
    if pg is None:
        return 0.0
    layers = sum(chunk_layers)
    slack = stage * forward_s / len(chunk_layers)
    if not pg.overlapped or layers == 0 or chunk_layers[0] == 0:
        return max(0.0, pg.total_s - slack)
    per_layer = forward_s / layers * (1.0 + share)
    return max(0.0, pass_exposed_s(chunk_layers[0], pg.layer_s, per_layer, 0.0, True) - slack)


def gather_total_s(pg: ParamGather, layers: int) -> float:
    """Seconds ``pg`` occupies the DP links: one collective, or one per layer when overlapped."""
    return pg.total_s if not pg.overlapped or layers == 0 else layers * pg.layer_s
