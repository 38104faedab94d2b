"""TEMPORARY stand-in for the runner (replaced by the wt-runner branch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Row = dict[str, str | int | float | bool | None]


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int
    points: tuple[Any, ...]


class ChunkTask(Protocol):
    def __call__(self, chunk: Chunk) -> list[Row]: ...


def run_chunks(task: ChunkTask, chunks: Sequence[Chunk], **_: Any) -> list[Row]:
    rows: list[Row] = []
    for chunk in chunks:
        rows.extend(task(chunk))
    return rows


class Progress:
    def __init__(self, total_points: int, stream: Any = None, label: str = "") -> None: ...
    def advance(self, points: int) -> None: ...
    def close(self) -> None: ...


class ResultStore:
    def __init__(self, directory: Any, key: str) -> None: ...
    def finish(self, rows: list[Row]) -> tuple[Any, Any]: return ()  # type: ignore[return-value]
