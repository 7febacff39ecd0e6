"""Files written whole or not at all.

Every file statetrack writes (checkpoints, reports, tables, plots, constructions) goes through
:func:`write_file`: the bytes go to a temporary name in the target's folder, are flushed and synced,
then renamed over the target (or, with ``exclusive``, linked to it only if no file has that name yet).
A failure (no space left, permission denied, a read-only file system, a folder that cannot be
created) removes the temporary file and ends in one :class:`UserError` line naming the path and the
reason; no empty or half-written file is left behind.

A folder the user chose (a report's ``--out``) may hold what others put there: inside :func:`inside`,
every file and folder is written only as a regular file or folder below that folder, never through a
symbolic link (a link ``out/s -> /victim`` would have had the report's figures written into ``/victim``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from statetrack.errors import UserError
from statetrack.untrusted import open_regular


def reason(e: OSError) -> str:
    """The operating system's words for an error ('No space left on device', 'Permission denied')."""
    return e.strerror or (errno.errorcode.get(e.errno, "") if e.errno else "") or str(e) or type(e).__name__


#: the folder the user chose, inside which writes are confined (:func:`inside`)
_ROOT: ContextVar[Path | None] = ContextVar("statetrack_write_root", default=None)


@contextlib.contextmanager
def inside(folder: str | os.PathLike) -> Iterator[Path]:
    """Within the block, every file and folder written (:func:`write_file`, :func:`ensure_dir`) must lie
    below ``folder`` and be reached without a symbolic link below it (``folder`` itself, chosen by the
    user, may be one): a path outside it, or a link on the way (a link in the folder named like a figure
    folder, or like a file to write), is a UserError naming the link; nothing is written through it."""
    token = _ROOT.set(Path(folder).absolute())
    try:
        yield Path(folder)
    finally:
        _ROOT.reset(token)


def check_inside(path: str | os.PathLike, action: str) -> None:
    """Refuse (a UserError ``"<action>: ..."``) a path outside the folder of :func:`inside`, or one whose
    way down from it passes a symbolic link (checked with ``lstat``, never followed). Outside any
    :func:`inside` block, nothing is checked."""
    root = _ROOT.get()
    if root is None:
        return
    target = Path(path).absolute()
    try:
        rel = target.relative_to(root)
    except ValueError:
        rel = None
    if rel is None or ".." in rel.parts:
        raise UserError(f"{action}: it is outside the folder chosen for the output, {str(root)!r}")
    here = root
    for part in rel.parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return  # what is not there yet is created as a regular file or folder
        except OSError:
            return  # cannot be looked at: writing there says why
        if stat.S_ISLNK(mode):
            raise UserError(
                f"{action}: {str(here)!r} is a symbolic link; files are written only as regular files inside "
                f"the chosen folder {str(root)!r}, never through a link (remove the link, or choose another "
                "folder)"
            )


def write_chosen(path: str | os.PathLike, data: bytes | str, what: str = "file") -> Path:
    """Write ``data`` to ``path``, a file the user named (``--out FILE``): as :func:`write_file`, inside
    the folder that holds it, so a symbolic link at ``path`` is refused, not replaced or written through."""
    with inside(Path(path).absolute().parent):
        return write_file(path, data, what=what)


def ensure_dir(folder: str | os.PathLike, action: str | None = None) -> Path:
    """Create ``folder`` (and its parents) if needed; a UserError ``"<action>: <reason>"`` if impossible."""
    folder = Path(folder)
    action = action or f"cannot create folder {str(folder)!r}"
    check_inside(folder, action)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError(f"{action}: a file is in the way of the folder {str(folder)!r}") from None
    except OSError as e:
        raise UserError(f"{action}: {reason(e)}") from None
    if not folder.is_dir():
        raise UserError(f"{action}: a file is in the way of the folder {str(folder)!r}")
    return folder


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is (links followed): None for a regular file, else ``"a folder"``, ``"a FIFO (named
    pipe)"``, ``"a character device"`` ...; ``"missing"`` when nothing is there (or a file is where a
    folder of its path should be); None too when it cannot be looked at (no permission: opening it says
    so). Looked at without opening it (opening a FIFO would wait for a writer)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError:  # no permission to look: the reader that opens it says why
        return None
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def check_writable(folder: str | os.PathLike, action: str) -> None:
    """Refuse now, before any work, if files cannot be created in ``folder`` (or, when it does not exist
    yet, in the nearest folder above it that does): a UserError ``"<action>: <reason>"``. Leaves nothing
    behind: a probe file is created and removed."""
    folder = Path(folder).absolute()
    probe_in = folder
    while not probe_in.exists() and probe_in.parent != probe_in:
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise UserError(f"{action}: a file is in the way of the folder {str(probe_in)!r}")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe_in, prefix=".statetrack-probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise UserError(f"{action}: {reason(e)}") from None


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, exclusive: bool = False, what: str = "file") -> Iterator[Path]:
    """The one way files are written: a temporary name beside ``path`` for the block to write (a writer
    that takes a file name: ``np.savez``, a tokenizer's ``save``), then fsync and rename to ``path``;
    if the block fails, no file is left. An OSError (a full disk, no permission) is a UserError naming
    ``what`` and the path.

    ``exclusive``: never replace an existing file (a checkpoint belongs to one run); a name already
    taken is a UserError. Folders are created as needed.
    """
    path = Path(path)
    check_inside(path, f"cannot write {what} {str(path)!r}")
    ensure_dir(path.parent, f"cannot write {what} {str(path)!r}")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        yield tmp
        check_inside(path, f"cannot write {what} {str(path)!r}")  # nothing put a link in the way meanwhile
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            if not place_new(tmp, path):
                raise UserError(
                    f"cannot write {what} {str(path)!r}: a file of that name exists and is not replaced"
                )
        else:
            os.replace(tmp, path)
        sync_dir(path.parent)
    except OSError as e:
        raise UserError(f"cannot write {what} {str(path)!r}: {reason(e)}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def write_file(
    path: str | os.PathLike, data: bytes | str, exclusive: bool = False, what: str = "file"
) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`); returns the path."""
    if isinstance(data, str):
        data = data.encode()
    with atomic_write(path, exclusive, what) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    return Path(path)


def place_new(tmp: Path, path: Path) -> bool:
    """Give the finished file ``tmp`` the name ``path`` unless that name exists (then False): a hard
    link, so the check and the naming are one step (on a file system without hard links, a rename after
    a check). ``tmp`` itself is left for the caller to remove."""
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
            raise
    if path.exists():
        return False
    os.rename(tmp, path)
    return True


def sync_dir(folder: Path) -> None:
    """Make a rename durable (best effort: not every platform can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sha256_file(path: str | os.PathLike) -> str | None:
    """The file's sha256 (hex), or None if it cannot be read or is not a regular file (a path from a
    database may name a FIFO or ``/dev/zero``: ``untrusted.open_regular`` refuses them before a byte is
    read)."""
    h = hashlib.sha256()
    try:
        with os.fdopen(open_regular(path), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
