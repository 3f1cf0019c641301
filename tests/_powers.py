"""Children that file permissions hold for, even when the tests run as root.

Root passes every permission check (CAP_DAC_OVERRIDE), so a file made read-only is still
writable to a child of root. :func:`ordinary_child` gives such a child no capabilities at
all: it keeps its user (and so can still run this Python, wherever it is installed) but
reads and writes files as any owner does, by their mode bits.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

__all__ = ["ordinary_child", "run_on_read_only_file"]

_PR_CAPBSET_DROP = 24
_EINVAL = 22


def _capability_dropper() -> Callable[[], None]:
    """A function for the child, before exec, that empties the bounding set, so the new
    program starts with no capability (a root process gets only those the bounding set
    keeps). prctl is looked up here, in the parent: the child only calls it."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]

    def drop() -> None:
        for cap in range(64):
            if prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != _EINVAL:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")

    return drop


def ordinary_child() -> Callable[[], None] | None:
    """The ``preexec_fn`` for a child that permissions hold for: ``None`` when this process
    is not root (its children already are such), else one that drops every capability.

    Skips the test (with the reason) where that cannot be done: not Linux, or the bounding
    set cannot be changed here, checked on a read-only file first.
    """
    if os.geteuid() != 0:
        return None
    if not sys.platform.startswith("linux"):
        pytest.skip("root passes every permission check and capabilities are Linux only")
    drop = _capability_dropper()
    folder = tempfile.mkdtemp(prefix="ctxslots-powers-")
    path = os.path.join(folder, "read-only")
    try:
        with open(path, "w"):
            pass
        os.chmod(path, 0o444)
        check = "import os, sys; sys.exit(0 if not os.access(sys.argv[1], os.W_OK) else 3)"
        done = subprocess.run([sys.executable, "-c", check, path],
                              preexec_fn=drop, capture_output=True, text=True,
                              timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"root's children cannot give up their capabilities here: {exc}")
    finally:
        os.chmod(path, 0o644)
        os.unlink(path)
        os.rmdir(folder)
    if done.returncode != 0:
        pytest.skip("root's children keep their power to write here "
                    f"(exit {done.returncode}: {done.stderr.strip()[:200]})")
    return drop


def run_on_read_only_file(path: Path, args: Sequence[str], *,
                          file_too: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` as a child that permissions hold for (see :func:`ordinary_child`,
    which skips where they cannot) while ``path`` (unless not ``file_too``) and its folder
    are read-only; their modes come back after, whatever happened."""
    preexec = ordinary_child()
    if file_too:
        os.chmod(path, 0o444)
    os.chmod(path.parent, 0o555)
    try:
        return subprocess.run([sys.executable, *args], preexec_fn=preexec, capture_output=True,
                              text=True, timeout=120, check=False)
    finally:
        os.chmod(path.parent, 0o755)
        os.chmod(path, 0o644)
