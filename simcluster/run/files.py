"""Result files are written whole or not at all (write to a temporary file, then rename)."""

from __future__ import annotations

from pathlib import Path

from simcluster.errors import SpecError
from simcluster.observe.tracer import write_text_atomic


def write_atomic(path: str | Path, text: str, key: str = "") -> None:
    """Write ``text`` to ``path`` atomically; ``SpecError`` naming the path if it cannot be written."""
    try:
        write_text_atomic(path, text)
    except OSError as err:
        raise SpecError(key, f"cannot write {path}: {err.strerror}") from None
