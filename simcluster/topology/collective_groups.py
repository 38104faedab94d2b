"""Communication structures over groups of ranks: NCCL-style rings and the double binary tree.

Ranks are global GPU indices, node-major: rank ``node * gpus_per_node + local``. The functions here
are pure (no graph needed); :func:`gpu_vertex` maps a rank to its vertex in the link graph.
"""

from __future__ import annotations

from collections.abc import Iterable

from simcluster.errors import SpecError
from simcluster.spec.hardware import TopologySpec
from simcluster.topology.node import Vertex


def gpu_vertex(topo: TopologySpec, rank: int) -> Vertex:
    """The graph vertex ``("gpu", node, local)`` of global rank ``rank`` (node-major numbering).

    Raises
    ------
    SpecError
        ``ranks`` when ``rank`` is negative.
    """
    if rank < 0:
        raise SpecError("ranks", f"must be >= 0, got {rank}")
    node, local = divmod(rank, topo.gpus_per_node)
    return ("gpu", node, local)


def ring_order(topo: TopologySpec, ranks: Iterable[int]) -> list[int]:
    """Order ``ranks`` into a ring that crosses each node boundary once, as NCCL's rings do.

    Ranks are grouped by node (nodes ascending) into intra-node chains, so the ring leaves each node
    once: with ``k > 1`` nodes it has exactly ``k`` inter-node hops (the wrap-around included).
    Chains alternate direction (local indices ascending on even positions, descending on odd ones),
    so the hop between two nodes joins GPUs of the same local index, i.e. of the same rail; with an
    odd number of nodes only the wrap-around hop changes rail. Local order keeps NVLink-bridge
    groups and PCIe switches contiguous.

    Parameters
    ----------
    topo : TopologySpec
        Gives ``gpus_per_node``.
    ranks : iterable of int
        Distinct global ranks, >= 0.

    Returns
    -------
    list of int
        The ranks in ring order, starting from the lowest rank.

    Raises
    ------
    SpecError
        ``ranks`` for a negative or repeated rank.
    """
    chains: dict[int, list[int]] = {}
    for rank in sorted(_distinct(ranks)):
        chains.setdefault(rank // topo.gpus_per_node, []).append(rank)
    order: list[int] = []
    for position, node in enumerate(sorted(chains)):
        order.extend(chains[node] if position % 2 == 0 else reversed(chains[node]))
    return order


def _distinct(ranks: Iterable[int]) -> list[int]:
    items = list(ranks)
    if len(set(items)) != len(items):
        raise SpecError("ranks", f"has repeated ranks: {items}")
    if any(r < 0 for r in items):
        raise SpecError("ranks", f"must be >= 0, got {min(items)}")
    return items


def double_binary_tree(n: int) -> tuple[list[int], list[int]]:
    """NCCL's two complementary binary trees over ``n`` nodes, as parent arrays (root: -1).

    Tree 1 (``ncclGetBtree``, NVIDIA/nccl @5067397 ``src/graph/trees.cc``): rooted at 0;
    a rank with lowest set bit ``bit`` has parent ``(rank ^ bit) | (bit << 1)``, or ``rank ^ bit``
    when that is ``>= n``. Tree 2 (``ncclGetDtree``) mirrors tree 1 for even ``n``
    (``parent2[r] = n-1-parent1[n-1-r]``, rooted at ``n-1``) and shifts it by one for odd ``n``
    (``parent2[r] = (parent1[r-1 mod n] + 1) mod n``, rooted at 1). Every odd rank is a leaf of
    tree 1 and every even rank other than 0 is a leaf of tree 2. So for even ``n`` each rank is an
    inner node of at most one tree (each sends and receives about the message size per phase,
    Sanders, Speck and Träff, Parallel Computing 2009); for odd ``n >= 3`` rank 0 is inner in both.

    Parameters
    ----------
    n : int
        Number of tree ranks (nodes), >= 1.

    Returns
    -------
    tuple of two lists of int
        ``parent[r]`` of each rank in tree 1 and tree 2; -1 marks the root.
    """
    if n < 1:
        raise SpecError("n", f"must be >= 1, got {n}")
    tree1 = [btree_parent(n, rank) for rank in range(n)]
    if n % 2 == 0:
        tree2 = [_mirror(tree1[n - 1 - rank], n) for rank in range(n)]
    else:
        tree2 = [_shift(tree1[(rank - 1) % n], n) for rank in range(n)]
    return tree1, tree2


def btree_parent(n: int, rank: int) -> int:
    """Parent of ``rank`` in NCCL's btree over ``n`` ranks (``ncclGetBtree``); root 0 gets -1."""
    if rank == 0:
        return -1
    bit = rank & -rank  # lowest set bit
    parent = (rank ^ bit) | (bit << 1)
    return parent if parent < n else rank ^ bit


def _mirror(parent: int, n: int) -> int:
    return -1 if parent == -1 else n - 1 - parent


def _shift(parent: int, n: int) -> int:
    return -1 if parent == -1 else (parent + 1) % n
