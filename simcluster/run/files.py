"""Result files are written whole or not at all (write to a temporary file, then rename)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from simcluster.errors import SpecError


def write_atomic(path: str | Path, text: str, key: str = "") -> None:
    """Write ``text`` to ``path`` atomically; ``SpecError`` naming the path if it cannot be written."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent or Path("."), prefix=f".{target.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except OSError as err:
        raise SpecError(key, f"cannot write {target}: {err.strerror}") from None
