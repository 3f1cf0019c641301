"""A plugin installed as ``pip install`` leaves one: a distribution on a folder whose
``ctxslots`` entry point names a module beside it."""

from __future__ import annotations

from pathlib import Path


def install_plugin(folder: Path, name: str, source: str) -> Path:
    """Write the distribution ``ctxslots-NAME`` 1.0 on ``folder``, its entry point ``NAME``
    the module ``ctxslots_NAME_mod`` holding ``source``; returns ``folder`` (put it on
    ``sys.path`` or ``PYTHONPATH`` and name the plugin in ``CTXSLOTS_LOAD_PLUGINS``)."""
    info = folder / f"ctxslots_{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: ctxslots-{name}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[ctxslots]\n{name} = ctxslots_{name}_mod\n",
                                           encoding="utf-8")
    (folder / f"ctxslots_{name}_mod.py").write_text(source, encoding="utf-8")
    return folder
