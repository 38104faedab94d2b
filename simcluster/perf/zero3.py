"""ZeRO-3 (fully sharded data parallelism): per-layer parameter gathers and gradient scatters.

Each layer's 16-bit parameters are all-gathered over the DP group before its forward and again
before its backward; its gradients are reduce-scattered after its backward, every micro-batch
(Rajbhandari et al. SC'20 section 7.2.2: 3x the parameter volume per micro-batch instead of 2x
per step; PyTorch FSDP, Zhao et al. VLDB 2023, and DeepSpeed stage 3 work this way).
Nothing is reduced after the last backward and nothing is gathered after the optimizer step.

With prefetching (``execution.zero3_prefetch``, FSDP's forward/backward prefetch and DeepSpeed's
prefetch bucket) the next layer's gather is issued when a layer's compute starts, so a pass over
``L`` identical layers is a two-machine flow shop (communication, then compute) whose makespan is
``comm + L * compute + (L - 1) * max(0, comm - compute)`` (identical jobs in Johnson's 1954
two-machine flow shop): the first gather is always exposed, the others only by what they exceed
the compute. In backward the communication per layer is the gather plus the previous layer's
reduce-scatter (one network), and the pass ends when the last reduce-scatter has (FSDP's
post-backward callback waits for it).
Without prefetching every gather and reduce-scatter blocks the compute stream.

Simplifications (stated): the embedding and output layer are spread evenly over the layers;
TP/CP/EP communication inside a layer does not help hide the gathers.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.perf.collectives import collective_time
from simcluster.perf.comm_plan import ACT_BYTES, Groups
from simcluster.perf.kernels.lowp import recipe_of, weight_cast_bytes
from simcluster.perf.memory import grad_bytes_of, stage_chunks, stage_params
from simcluster.perf.offload import layer_copies_s
from simcluster.spec.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Zero3Layer:
    """One layer's ZeRO-3 collectives alone on idle links, seconds."""

    gather_s: float
    scatter_s: float


def zero3_layer(s: Scenario, g: Groups, params_on_gpu: float) -> Zero3Layer | None:
    """Per-layer gather and reduce-scatter of ``params_on_gpu`` spread over the model's layers.

    With ``parallelism.offload: optimizer+params`` each gather is preceded by the PCIe fetch of
    this GPU's shard of the layer and each reduce-scatter followed by the copy of its gradient
    shard to the host (:func:`simcluster.perf.offload.layer_copies_s`); without data parallelism
    those copies are the whole per-layer transfer. None without ZeRO-3, or without data
    parallelism and parameter offload.
    """
    if s.parallelism.zero_stage < 3:
        return None
    per_layer = params_on_gpu / s.model.layers
    fetch, drain = layer_copies_s(s, per_layer, grad_bytes_of(s))
    if g.dp is None:
        return Zero3Layer(fetch, drain) if fetch or drain else None
    gather = collective_time("all_gather", per_layer * ACT_BYTES[s.precision], g.dp).time_s
    scatter = collective_time("reduce_scatter", per_layer * grad_bytes_of(s), g.dp).time_s
    if fetch or drain:  # ZeRO-Infinity: fetch the shard, then gather; scatter, then drain it
        return Zero3Layer(fetch + gather, scatter + drain)
    return Zero3Layer(gather, scatter)


def copy_out_bytes(s: Scenario) -> float:
    """Bytes one layer's all-gather copy-out moves on the compute stream (0 unless it applies).

    FSDP2 (per-parameter sharding) all-gathers a layer's shards into one flat buffer and then
    copies each parameter out of it (``foreach_all_gather_copy_out``, ``split_with_sizes_copy``:
    pytorch/pytorch#117950, #117203) on the compute stream, before the layer's forward and again
    before its backward: one read and one write of the layer's unsharded 16-bit parameters.
    FSDP1's flat parameters and DeepSpeed use the gathered buffer in place
    (``execution.zero3_copy_out: false``).
    """
    if not _fsdp2_copies(s):
        return 0.0
    return 2.0 * _layer_params(s) * ACT_BYTES[s.precision]


def copy_in_bytes(s: Scenario) -> float:
    """Bytes one layer's reduce-scatter copy-in moves before the compute stream goes on (0 unless
    FSDP2's copies apply, ``execution.zero3_copy_out``).

    After a layer's backward FSDP2 copies its unsharded gradients into one flat reduce-scatter
    input in the reduce dtype (``foreach_reduce_scatter_copy_in``, a ``torch.cat`` into the
    buffer), on the reduce-scatter stream, and the compute stream waits for that copy before it
    goes on (``current_stream.wait_event(copy_in_event)``: "Only after the copy-in finishes can we
    free the gradients"; pytorch/pytorch@01d66d21 ``torch/distributed/_composable/fsdp/
    _fsdp_collectives.py`` ``foreach_reduce_scatter``): one read of the 16-bit gradients and one
    write in the reduce dtype (fp32 under torchtitan's ``mixed_precision_reduce``) per parameter
    of the layer. The gradient pre-division on the same buffer is not counted (whether it runs
    depends on the version's divide factors).
    """
    if not _fsdp2_copies(s):
        return 0.0
    return _layer_params(s) * (ACT_BYTES[s.precision] + grad_bytes_of(s))


def grad_cast_divide_bytes(s: Scenario) -> float:
    """Bytes one layer's gradient preparation moves before its reduce-scatter, each micro-batch
    (0 unless ``execution.grad_cast_divide`` applies: ZeRO-2/3 with data parallelism).

    PyTorch FSDP1 (``torch/distributed/fsdp/_runtime_utils.py``, ``_post_backward_hook``, v2.0 and
    v2.1), on its post-backward stream, for every sharded ``FlatParameter``:

    - casts the unsharded gradient to the reduce dtype where it differs from the gradient's
      (``flat_param.grad.to(handle._reduce_dtype)``): a read of the 16-bit gradient and a write
      in the reduce dtype (fp32 under composer's ``mixed_precision: DEFAULT`` from 0.16.4);
    - divides it by the pre-divide factor before the reduce-scatter (``_div_if_needed
      (padded_unsharded_grad, state._gradient_predivide_factor)``; the default hook's
      ``reduce_scatter_hook`` in v2.0): a read and a write in the reduce dtype. The factor
      (``_get_gradient_predivide_factor``: doubled while it divides the group size ``n`` and
      stays below ``n`` over itself, about ``sqrt(n)``) is at least 2 for any ``n >= 2``, so the
      division runs.

    The stream runs beside the next layer's backward, but these kernels take the same HBM and
    SMs the backward's kernels would: they are counted as backward time of the layer (a stated
    simplification). The flat parameter is padded to a multiple of the group at construction,
    so no padding copy runs; the sharded-gradient cast and accumulation are ``1/dp`` of this and
    not counted.
    """
    par = s.parallelism
    if not s.execution.grad_cast_divide or par.zero_stage < 2 or par.dp * par.cp < 2:
        return 0.0
    grad, reduce = ACT_BYTES[s.precision], grad_bytes_of(s)
    cast = grad + reduce if reduce != grad else 0.0
    return _layer_params(s) * (cast + 2 * reduce)


def _fsdp2_copies(s: Scenario) -> bool:
    par = s.parallelism
    return par.zero_stage >= 3 and par.dp > 1 and s.execution.zero3_copy_out


def zero3_weight_cast_bytes(s: Scenario) -> float:
    """Bytes of quantizing one layer's gathered weights under a low-precision format with
    ZeRO-3, once per gathered pass (the copies cannot be kept across micro-batches when the
    weights are freed after each pass; :mod:`.kernels.lowp`); 0 otherwise."""
    recipe = recipe_of(s.precision, s.execution.fp8_recipe)
    if recipe == "none" or s.parallelism.zero_stage < 3:
        return 0.0
    return weight_cast_bytes(recipe, _layer_params(s))


def _layer_params(s: Scenario) -> float:
    """Unsharded parameters of one layer (the stage's dense parameters spread over the layers)."""
    return stage_params(s.model, s.parallelism, 0, s.model.layers).dense / s.model.layers


def pass_exposed_s(layers: int, before_s: float, compute_s: float, after_s: float,
                   prefetch: bool) -> float:
    """Communication left exposed by one pass over ``layers`` identical layers.

    Parameters
    ----------
    layers : int
        Layers in the pass.
    before_s : float
        Collective each layer needs before its compute (the parameter gather).
    compute_s : float
        Compute of one layer.
    after_s : float
        Collective each layer issues after its compute (the gradient reduce-scatter; 0 in forward).
    prefetch : bool
        Whether the next layer's gather is issued when a layer's compute starts.

    Returns
    -------
    float
        Pass time minus ``layers * compute_s``.
    """
    if layers <= 0:
        return 0.0
    if not prefetch:
        return layers * (before_s + after_s)
    return before_s + (layers - 1) * max(0.0, before_s + after_s - compute_s) + after_s


def zero3_step_s(s: Scenario, layer: Zero3Layer | None, forward_s: float,
                 backward_s: float, wgrad_s: float = 0.0) -> tuple[float, float]:
    """(exposed, total) ZeRO-3 communication of a step (pp = 1).

    ``forward_s`` and ``backward_s`` are one micro-batch's forward and backward compute (recompute
    included), spread evenly over the layers; each virtual chunk is one pass. Under ZB-H1 the
    backward is two passes (:func:`simcluster.sim.schedules.zb_h1`): the input gradient ``Bi``,
    which needs the gathered parameters, then the weight gradient ``W`` (``wgrad_s`` of the
    backward), after which each layer's gradients are reduce-scattered, so the reduce-scatters
    hide behind ``W`` alone rather than the whole backward.
    """
    if layer is None:
        return 0.0, 0.0
    n, m = s.model.layers, s.parallelism.micro_batches
    prefetch = s.execution.zero3_prefetch
    split = s.parallelism.schedule == "zb-h1"
    exposed = 0.0
    for k in stage_chunks(s.parallelism, n)[0]:
        exposed += pass_exposed_s(k, layer.gather_s, forward_s / n, 0.0, prefetch)
        if split:
            exposed += (pass_exposed_s(k, layer.gather_s, (backward_s - wgrad_s) / n, 0.0,
                                       prefetch)
                        + pass_exposed_s(k, 0.0, wgrad_s / n, layer.scatter_s, prefetch))
        else:
            exposed += pass_exposed_s(k, layer.gather_s, backward_s / n, layer.scatter_s,
                                      prefetch)
    return m * exposed, m * n * (2 * layer.gather_s + layer.scatter_s)
