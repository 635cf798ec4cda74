"""Reading and writing files: encodings, BOM, CRLF, modes, symlinks and atomicity."""
from __future__ import annotations

import os
import stat

import pytest

from fusionlint.sourcefile import SourceFileError, decode_source, read_source, write_atomic, write_source


def leftovers(folder) -> list[str]:
    return [name for name in os.listdir(folder) if "fusionlint-tmp" in name]


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (b"x = 1\r\ny = 2\r\n", "utf-8"),
        (b"\xef\xbb\xbfx = '\xc3\xa9'\r\n", "utf-8-sig"),
        (b"# -*- coding: latin-1 -*-\nx = '\xe9'\n", "iso-8859-1"),
        (b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\nx = '\x80'\n", "cp1252"),
        (b"x = 1\ry = 2\r", "utf-8"),
    ],
)
def test_round_trip_is_byte_exact(tmp_path, data, encoding):
    path = tmp_path / "m.py"
    path.write_bytes(data)
    source = read_source(path)
    assert source.encoding == encoding
    assert source.data == data
    write_source(source, source.text)
    assert path.read_bytes() == data


def test_edit_keeps_bom_crlf_and_cookie_encoding(tmp_path):
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfa = 1\r\nb = 2\r\n")
    source = read_source(bom)
    assert source.text == "a = 1\r\nb = 2\r\n"  # BOM stripped, CRLF kept
    write_source(source, source.text.replace("2", "'\u00e9'"))
    assert bom.read_bytes() == b"\xef\xbb\xbfa = 1\r\nb = '\xc3\xa9'\r\n"

    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# coding: latin-1\nname = '\xe9'\n")
    source = read_source(latin)
    write_source(source, source.text + "other = '\u00e0'\n")
    assert latin.read_bytes() == b"# coding: latin-1\nname = '\xe9'\nother = '\xe0'\n"


def test_notebooks_are_utf8_whatever_their_first_lines_say(tmp_path):
    text, encoding = decode_source('{\n "cells": [], "x": "\u00e9"}'.encode(), notebook=True)
    assert encoding == "utf-8" and "\u00e9" in text
    assert decode_source(b"\xef\xbb\xbf{}", notebook=True) == ("{}", "utf-8-sig")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"x = '\xff'\n", "not valid utf-8: byte b'\\xff' at line 1"),
        (b"a = 1\nb = 2\nc = '\xe9'\n", "not valid utf-8: byte b'\\xe9' at line 3"),
        (b"# coding: klingon\nx = 1\n", "bad encoding declaration"),
        (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "bad encoding declaration"),
    ],
)
def test_undecodable_files_say_why(tmp_path, data, message):
    path = tmp_path / "bad.py"
    path.write_bytes(data)
    with pytest.raises(SourceFileError) as error:
        read_source(path)
    assert message in str(error.value)


def test_unreadable_paths_say_why(tmp_path):
    dangling = tmp_path / "gone.py"
    dangling.symlink_to(tmp_path / "nowhere.py")
    with pytest.raises(SourceFileError, match="cannot read file: No such file or directory"):
        read_source(dangling)
    folder = tmp_path / "pkg.py"
    folder.mkdir()
    with pytest.raises(SourceFileError, match="not a regular file"):
        read_source(folder)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied(tmp_path):
    path = tmp_path / "secret.py"
    path.write_text("x = 1\n")
    path.chmod(0)
    with pytest.raises(SourceFileError, match="Permission denied"):
        read_source(path)


def test_a_fix_keeps_mode_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "run.py"
    path.write_bytes(b"old\n")
    path.chmod(0o751)
    write_source(read_source(path), "new\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert leftovers(tmp_path) == []


def test_a_fix_to_a_symlink_rewrites_its_resolved_target(tmp_path):
    target = tmp_path / "real.py"
    target.write_bytes(b"old\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_source(read_source(link), "new\n")
    assert link.is_symlink()
    assert target.read_bytes() == b"new\n"


def test_atomic_write_replaces_a_link_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    link = tmp_path / "findings.json"
    link.symlink_to(victim)
    write_atomic(link, b"{}")
    assert not link.is_symlink() and link.read_bytes() == b"{}"
    assert victim.read_bytes() == b"precious\n"
    assert stat.S_IMODE(link.stat().st_mode) == 0o600


def test_failed_write_leaves_the_original_untouched(tmp_path):
    path = tmp_path / "keep.py"
    path.write_bytes(b"precious\n")
    with pytest.raises(TypeError):
        write_atomic(path, "not bytes")  # fails after the temporary file exists
    assert path.read_bytes() == b"precious\n"
    assert leftovers(tmp_path) == []


def test_text_the_file_encoding_cannot_hold_is_refused(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# coding: latin-1\nx = 1\n")
    source = read_source(path)
    with pytest.raises(SourceFileError, match="cannot be written as iso-8859-1"):
        write_source(source, source.text + "y = '\u4e2d'\n")
    assert path.read_bytes() == b"# coding: latin-1\nx = 1\n"
