"""Reading and writing the user's files without losing anything they had.

Text is decoded with the codec the file declares (PEP 263 cookie, or a UTF-8 BOM, which the
``utf-8-sig`` codec strips on read and puts back on write) and without newline translation,
so CRLF survives the round trip. Only regular files are read (a FIFO would block the run).

Writes go to a new temporary file in the same folder that then replaces the original, so an
interrupted write never leaves a truncated file behind, and a link is never written through.
A fix is written only when that loses nothing: not to a read-only file, not to a file with
other hard links (a replace would split them), not over an edit made since the file was read,
and the new file keeps the old one's owner and permission bits.
"""
from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path


class SourceFileError(Exception):
    """A file that cannot be read, decoded or encoded back; the message says why, in the user's terms."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    data: bytes  # the bytes on disk (the cache hashes these)
    text: str
    encoding: str  # codec that turns ``text`` back into ``data``
    identity: tuple[int, ...] | None = None  # the file's stat identity when read (None: not from disk)


def is_notebook_path(path: Path | str) -> bool:
    return str(path).endswith(".ipynb")


def decode_source(data: bytes, notebook: bool = False) -> tuple[str, str]:
    """Return ``(text, encoding)``; notebooks are JSON, hence UTF-8 whatever their first lines say."""
    if notebook:
        encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
    else:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:
            # Either the first two lines are not UTF-8 (say which byte), or their cookie is bad.
            _decode(data, "utf-8")
            raise SourceFileError(f"bad encoding declaration: {exc}") from None
    return _decode(data, encoding), encoding


def _decode(data: bytes, encoding: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.end]
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceFileError(f"not valid {encoding}: byte {bad!r} at line {line}") from None


def read_source(path: Path) -> SourceFile:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SourceFileError("not a regular file")
        with open(path, "rb") as handle:
            data = handle.read()
            identity = _identity(os.fstat(handle.fileno()))
    except OSError as exc:
        raise SourceFileError(f"cannot read file: {exc.strerror or exc}") from None
    text, encoding = decode_source(data, notebook=is_notebook_path(path))
    return SourceFile(path=path, data=data, text=text, encoding=encoding, identity=identity)


def _identity(status: os.stat_result) -> tuple[int, ...]:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def write_atomic(
    path: Path, data: bytes, like: os.stat_result | None = None, unchanged: SourceFile | None = None
) -> None:
    """Replace the directory entry ``path`` with a file holding ``data``, in one step.

    Never writes through a link: the temporary file is created by ``mkstemp`` (``O_EXCL``, and
    ``O_NOFOLLOW`` where it exists), so a name planted in advance is never opened, and
    ``os.replace`` swaps the entry itself, so a symlink at ``path`` is replaced and its target
    left alone. ``like``: the stat of the file replaced, whose owner and permission bits the new
    one keeps (otherwise it is private, 0600). ``unchanged``: the file as it was read, checked
    right before the replace so that an edit made meanwhile is not overwritten.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".fusionlint-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if like is not None:
            mine = os.stat(tmp)
            if hasattr(os, "chown") and (like.st_uid, like.st_gid) != (mine.st_uid, mine.st_gid):
                os.chown(tmp, like.st_uid, like.st_gid)  # before chmod: chown clears setuid bits
            os.chmod(tmp, stat.S_IMODE(like.st_mode))
        if unchanged is not None:
            _check_unchanged(path, unchanged)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _check_unchanged(path: Path, source: SourceFile) -> None:
    try:
        same = _identity(os.stat(path)) == source.identity and path.read_bytes() == source.data
    except OSError:
        same = False
    if not same:
        raise SourceFileError("the file changed while it was being checked; run again")


def write_source(source: SourceFile, new_text: str) -> None:
    """Write a fixed text back, or raise ``SourceFileError`` saying why that would lose something.

    A symlink is resolved explicitly: the link stays a link and its target gets the new text.
    """
    try:
        data = new_text.encode(source.encoding)
    except UnicodeEncodeError as exc:
        raise SourceFileError(f"fixed text cannot be written as {source.encoding}: {exc.reason}") from None
    target = Path(os.path.realpath(source.path))
    try:
        status = os.stat(target)
    except OSError as exc:
        raise SourceFileError(f"cannot write file: {exc.strerror or exc}") from None
    if not status.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise SourceFileError("the file is read-only")
    if status.st_nlink > 1:
        raise SourceFileError(f"the file has {status.st_nlink} hard links, which replacing it would split")
    write_atomic(target, data, like=status, unchanged=source)
