"""Writing private files: whole or not at all, never through a symbolic link.

Memory holds personal data, and an export directory is often one a person
shares or syncs. So every file an export (or a prompt dump, or the demo) writes
is ``0600`` and every directory it creates ``0700``, whatever the umask (the
mode is set on the open descriptor, not left to the umask); a file is written under no name at all (Linux
``O_TMPFILE``; elsewhere a hidden temporary name beside it) and renamed over the
old one only once complete, so a full disk or a killed process leaves the old
file as it was and no temporary file behind; and a symbolic link where a file
or a directory of the export should be is refused, never followed.

Directories are handled by descriptor (``openat``, ``mkdirat``, ``renameat``),
so a link swapped in between a check and a write is not followed either. An
error names the full path of what could not be written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO, TypeVar

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "check_replaceable",
    "existing_subdir",
    "is_link",
    "make_private_dirs",
    "open_dir",
    "open_subdir",
    "read_head",
    "refuse_link",
    "remove_file",
    "replace_file",
    "write_private",
]

T = TypeVar("T")

#: The mode of every file an export writes.
PRIVATE_FILE = 0o600
#: The mode of every directory an export creates.
PRIVATE_DIR = 0o700

_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: Leftovers of the fallback (no ``O_TMPFILE``): ``.NAME.PID.RANDOM.tmp``.
_TEMP_SUFFIX = ".tmp"


def _link_error(path: str | Path) -> OSError:
    return OSError(errno.ELOOP, "is a symbolic link: ctxslots never writes a file through one "
                                "(remove the link, or write elsewhere)", str(path))


def refuse_link(dir_fd: int, name: str) -> None:
    """Raise ``OSError`` (``ELOOP``) when ``name`` in ``dir_fd`` is a symbolic link."""
    if is_link(dir_fd, name):
        raise _link_error(_path_of(dir_fd, name))


def _refuse_special(dir_fd: int, name: str) -> None:
    """Raise ``OSError`` when ``name`` exists and is no regular file (a pipe, a device,
    a directory): replacing it would put a file where it was, and its reader gets
    nothing."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise OSError(errno.EEXIST, "not a regular file (a pipe, a device or a directory), "
                      "and it is not replaced; write to standard output and redirect it",
                      _path_of(dir_fd, name))


def make_private_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """Create the directory ``path`` and any missing parent, each ``0700`` whatever the
    umask (directories that exist are left as they are); the ones this call made,
    outermost first."""
    missing = []
    for part in (Path(path), *Path(path).parents):
        if os.path.lexists(part):
            break
        missing.append(part)
    made = []
    for part in reversed(missing):
        try:
            os.mkdir(part, PRIVATE_DIR)
        except FileExistsError:
            continue  # made by another process meanwhile: theirs to set
        made.append(part)
        _set_mode_at(None, str(part), PRIVATE_DIR)
    return made


def _set_mode_at(dir_fd: int | None, name: str, mode: int) -> None:
    """Give the directory just made ``mode`` exactly, through a descriptor of it (a link
    swapped in is not followed)."""
    fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_dir(path: Path) -> Iterator[int]:
    """A descriptor of directory ``path`` (created ``0700`` with its missing parents).

    The directory a caller names is its own choice, so a link there is followed;
    every directory below it is opened with :func:`open_subdir`.
    """
    make_private_dirs(path)
    fd = os.open(path, os.O_RDONLY | _DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_subdir(parent: int, name: str) -> Iterator[int]:
    """A descriptor of the directory ``name`` in ``parent``, created ``0700`` when missing.

    :raises OSError: ``name`` is a symbolic link (``ELOOP``) or not a directory.
    """
    try:
        os.mkdir(name, PRIVATE_DIR, dir_fd=parent)
    except FileExistsError:
        pass
    else:
        _set_mode_at(parent, name, PRIVATE_DIR)
    fd = _open_dir_at(parent, name)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def existing_subdir(parent: int, name: str) -> Iterator[int | None]:
    """A descriptor of the directory ``name`` in ``parent``, or ``None`` when it is missing.

    :raises OSError: ``name`` is a symbolic link (``ELOOP``) or not a directory.
    """
    try:
        fd = _open_dir_at(parent, name)
    except FileNotFoundError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _open_dir_at(parent: int, name: str) -> int:
    try:
        return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and is_link(parent, name):
            raise _link_error(_path_of(parent, name)) from None
        raise


def _path_of(dir_fd: int, name: str) -> str:
    """A printable path of ``name`` in the directory ``dir_fd`` (for messages)."""
    with contextlib.suppress(OSError):
        return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
    return name


def is_link(dir_fd: int, name: str) -> bool:
    """Whether ``name`` in the directory ``dir_fd`` is a symbolic link."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def replace_file(dir_fd: int, name: str, write: Callable[[TextIO], T]) -> T:
    """Write ``name`` in ``dir_fd`` through ``write(fp)`` as a new private file that
    replaces the old one only once complete; return what ``write`` returned.

    :raises OSError: ``name`` is a symbolic link (``ELOOP``; nothing written), or
        writing failed (the old file is untouched, no temporary file is left); its
        ``filename`` is the full path of the file.
    """
    try:
        return _replace_file(dir_fd, name, write)
    except OSError as exc:
        full = _path_of(dir_fd, name)
        if exc.filename in (None, ".", name, full) or (
                isinstance(exc.filename, str) and exc.filename.startswith(f".{name}.")):
            raise OSError(exc.errno, exc.strerror or str(exc), full) from exc
        raise


def _replace_file(dir_fd: int, name: str, write: Callable[[TextIO], T]) -> T:
    refuse_link(dir_fd, name)
    _refuse_special(dir_fd, name)
    if _O_TMPFILE:
        try:
            fd = os.open(".", _O_TMPFILE | os.O_WRONLY, PRIVATE_FILE, dir_fd=dir_fd)
        except OSError as exc:  # a file system without O_TMPFILE
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
        else:
            return _fill_and_link(fd, dir_fd, name, write)
    return _fill_and_rename(dir_fd, name, write)


def _fill(fd: int, write: Callable[[TextIO], T]) -> T:
    os.fchmod(fd, PRIVATE_FILE)  # whatever the umask took away or left
    fp = os.fdopen(fd, "w", encoding="utf-8", newline="\n", closefd=False)
    result = write(fp)
    fp.flush()
    os.fsync(fd)
    return result


def _temp_name(name: str) -> str:
    return f".{name}.{os.getpid()}.{secrets.token_hex(4)}{_TEMP_SUFFIX}"


def _fill_and_link(fd: int, dir_fd: int, name: str, write: Callable[[TextIO], T]) -> T:
    """Write an unnamed file, then give it a temporary name and rename it over ``name``."""
    try:
        result = _fill(fd, write)
        temp = _temp_name(name)
        os.link(f"/proc/self/fd/{fd}", temp, dst_dir_fd=dir_fd, follow_symlinks=True)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    _rename(dir_fd, temp, name)
    return result


def _fill_and_rename(dir_fd: int, name: str, write: Callable[[TextIO], T]) -> T:
    """Without ``O_TMPFILE``: a hidden temporary name beside ``name``, then a rename."""
    _sweep(dir_fd, name)
    temp = _temp_name(name)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, PRIVATE_FILE,
                 dir_fd=dir_fd)
    try:
        result = _fill(fd, write)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    os.close(fd)
    _rename(dir_fd, temp, name)
    return result


def _rename(dir_fd: int, temp: str, name: str) -> None:
    try:
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a power cut
        os.fsync(dir_fd)


def _sweep(dir_fd: int, name: str) -> None:
    """Remove temporary files of ``name`` left by a process that no longer runs."""
    prefix = f".{name}."
    for entry in os.listdir(dir_fd):
        if not (entry.startswith(prefix) and entry.endswith(_TEMP_SUFFIX)):
            continue
        pid = entry[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(entry, dir_fd=dir_fd)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_head(dir_fd: int, name: str, size: int = 4096) -> str | None:
    """The first ``size`` bytes of a regular file ``name`` as text, or ``None`` when it is
    missing, a link, not a regular file or not UTF-8."""
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, size).decode("utf-8", "strict")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def remove_file(dir_fd: int, name: str) -> None:
    """Remove ``name`` from ``dir_fd`` (a link itself, never what it points to)."""
    os.unlink(name, dir_fd=dir_fd)


def check_replaceable(path: Path) -> None:
    """Raise, before anything is written or created, the ``OSError`` :func:`write_private`
    would raise for ``path`` before writing: no file name (a folder), a symbolic link
    there, or something there that is not a regular file. A path whose folder does not
    exist yet passes (the write creates it).
    """
    if not path.name or path.name == "..":
        raise OSError(errno.EISDIR, "names a folder, not a file", str(path))
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | _DIRECTORY)
    except FileNotFoundError:
        return
    try:
        refuse_link(dir_fd, path.name)
        _refuse_special(dir_fd, path.name)
    finally:
        os.close(dir_fd)


def write_private(path: Path, write: Callable[[TextIO], T]) -> T:
    """Write the file ``path`` as :func:`replace_file` does; its directory (and missing
    parents) are created ``0700``.

    :raises OSError: ``path`` is a symbolic link, or writing failed.
    """
    with open_dir(path.parent) as dir_fd:
        return replace_file(dir_fd, path.name, write)
