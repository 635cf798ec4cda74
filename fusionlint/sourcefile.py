"""Reading and writing the user's files without losing anything they had.

Text is decoded with the codec the file declares (PEP 263 cookie, or a UTF-8 BOM, which the
``utf-8-sig`` codec strips on read and puts back on write) and without newline translation,
so CRLF survives the round trip. Writes go to a temporary file in the same folder that then
replaces the original, so an interrupted write never leaves a truncated file behind.
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
        data = path.read_bytes()
    except OSError as exc:
        raise SourceFileError(f"cannot read file: {exc.strerror or exc}") from None
    text, encoding = decode_source(data, notebook=is_notebook_path(path))
    return SourceFile(path=path, data=data, text=text, encoding=encoding)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` in one step, keeping its permission bits.

    A symlink is followed, so the link stays a link and its target gets the new content.
    A new file gets the temporary file's private mode (0600).
    """
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".fusionlint-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def write_source(source: SourceFile, new_text: str) -> None:
    try:
        data = new_text.encode(source.encoding)
    except UnicodeEncodeError as exc:
        raise SourceFileError(f"fixed text cannot be written as {source.encoding}: {exc.reason}") from None
    write_atomic(source.path, data)
