"""Bounded memo caches of the analytical model's pure functions, and the keys they need.

A sweep evaluates ~1e5-1e6 layouts of one model on one cluster; most of the work for a layout
(collective times per group and size, parameters per stage shape, one layer's kernel times) is the
same for many layouts. The functions of :mod:`simcluster.perf` that compute those values are pure,
so they are memoised here with :func:`functools.lru_cache`: bounded, keyed on every argument, and
returning the very value a fresh call would (a cached value is immutable: frozen dataclasses,
tuples, floats). No result changes: ``tests/unit/test_perf_cache.py`` pins ~200 layouts bit for bit.

Spec classes with a ``dict`` field (:class:`~simcluster.spec.hardware.AcceleratorSpec`, hence
:class:`~simcluster.spec.hardware.TopologySpec`) cannot be hashed; a cached function takes them
wrapped in :class:`Keyed`, which hashes and compares a hashable projection that holds every field
the function reads (:func:`accelerator_key`, :func:`fabric_key`). No cache is keyed on ``id()``;
:func:`accelerator_key` remembers the key it built for the spec object it was last given (the
object itself is held and compared with ``is``, so an ``id`` is never reused while remembered).

:func:`clear_caches` empties every cache (tests; a benchmark's cold start).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from simcluster.spec.hardware import AcceleratorSpec, TopologySpec

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: Default bound of one cache: a GPT-3 175B sweep (16k layouts) needs a few thousand entries in the
#: largest cache (collective times), each a few hundred bytes.
MAXSIZE = 16384

_CLEARERS: list[Callable[[], None]] = []


def memoised(maxsize: int = MAXSIZE) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize, typed=True)`` registered with :func:`clear_caches`.

    ``typed`` keeps ``1`` and ``1.0`` apart, so a cached value is always the one the same argument
    types would compute.
    """

    def wrap(fn: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize, typed=True)(fn)
        _CLEARERS.append(cached.cache_clear)
        return cached  # type: ignore[return-value]

    return wrap


def clear_caches() -> None:
    """Empty every cache of :mod:`simcluster.perf` (results never depend on it)."""
    for clear in _CLEARERS:
        clear()
    _ACCELERATOR_KEYS.clear()


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Keyed(Generic[T]):
    """An unhashable spec with a hashable projection of it: hashes and compares by ``key`` only.

    ``key`` must determine every field of ``value`` a cached function reads, so two ``Keyed``
    that compare equal give the same result.
    """

    value: T
    key: Hashable

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keyed) and self.key == other.key


def _frozen(value: object) -> Hashable:
    """``value`` with every ``dict`` turned into a tuple of its items (insertion order)."""
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    return value


#: id -> (spec, key) of the accelerator specs :func:`accelerator_key` saw last (a sweep's layouts
#: share one spec object; building the key field by field cost a tenth of a layout's time).
_ACCELERATOR_KEYS: dict[int, tuple[AcceleratorSpec, tuple[Hashable, ...]]] = {}
_ACCELERATOR_KEYS_MAX = 64


def accelerator_key(acc: AcceleratorSpec) -> tuple[Hashable, ...]:
    """Every field of ``acc``, dicts as item tuples (the whole spec: any field may be read)."""
    seen = _ACCELERATOR_KEYS.get(id(acc))
    if seen is not None and seen[0] is acc:
        return seen[1]
    key = tuple(_frozen(getattr(acc, f.name)) for f in dataclasses.fields(acc))
    if len(_ACCELERATOR_KEYS) >= _ACCELERATOR_KEYS_MAX:
        _ACCELERATOR_KEYS.clear()
    _ACCELERATOR_KEYS[id(acc)] = (acc, key)
    return key


def keyed_accelerator(acc: AcceleratorSpec) -> Keyed[AcceleratorSpec]:
    """``acc`` wrapped for a cached function's argument."""
    return Keyed(acc, accelerator_key(acc))


def fabric_key(topo: TopologySpec) -> tuple[Hashable, ...]:
    """What group placement reads of ``topo``: the scale-up, host and scale-out specs (hashable,
    no dict fields) and the GPUs per node; not the accelerator."""
    return (topo.scale_up, topo.host, topo.scale_out, topo.gpus_per_node)


def keyed_fabric(topo: TopologySpec) -> Keyed[TopologySpec]:
    """``topo`` wrapped for :func:`simcluster.perf.collectives_group.comm_group`'s cache."""
    return Keyed(topo, fabric_key(topo))


def topology_key(topo: TopologySpec) -> tuple[Hashable, ...]:
    """Every field of ``topo``, the accelerator as :func:`accelerator_key` (the whole spec)."""
    return tuple(accelerator_key(value) if isinstance(value, AcceleratorSpec) else value
                 for value in (getattr(topo, f.name) for f in dataclasses.fields(topo)))


def keyed_topology(topo: TopologySpec) -> Keyed[TopologySpec]:
    """``topo`` wrapped for a cached function that may read any of its fields."""
    return Keyed(topo, topology_key(topo))
