"""Kernel models: what one operator costs on one GPU with one software stack.

The layer model (:mod:`simcluster.perf.compute`) lists a layer's operators with their shapes and
asks these modules what each costs; they answer with an :class:`~.operator.OperatorTime` (forward,
backward, weight-gradient seconds). One module per kernel family, the per-architecture data beside
them in the catalog:

- :mod:`.gemm`: GEMMs by shape (tile/wave model fitted on published GEMM sweeps, or the
  half-dimension curve), ``max(compute, memory)``;
- :mod:`.attention`: fused attention by kernel (``execution.attention``) from the kernels'
  published tables by architecture, head dimension, mask and sequence length
  (``catalog/attention.yaml``), and the unfused ``math`` path's pieces;
- :mod:`.elementwise`: memory-bound kernels (norms, activations, residuals, dropout, softmax,
  loss, optimizer, copies) as bytes over the achieved HBM bandwidth; :mod:`.eager` the op chains
  of eager PyTorch modules;
- :mod:`.comm_sms`: the SMs a collective's kernel takes from compute running beside it.
"""
