"""A lock held across processes of the machine (the test workers, other test runs)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["machine_lock"]


@contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Hold the lock ``name`` (a file in the temporary folder) while the block runs.

    Where ``fcntl`` is missing (Windows) the block runs unlocked: the tests there
    run in one process.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(Path(tempfile.gettempdir()) / f"ctxslots-{name}.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
