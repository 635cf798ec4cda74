"""Every example notebook, executed in a real Jupyter kernel and exported to HTML by nbconvert,
renders its plan diagrams in a real browser (headless Chromium): the DOM Chromium built holds the
SVG with one kernel count per report, and its screenshot shows the kernel boxes' colours.

One test per notebook, so xdist spreads them. CI installs Debian's chromium (.ci/run)."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")

import demo  # noqa: E402
import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from fusionrt.diagram import KIND_FILL  # noqa: E402

CHROMIUM = shutil.which("chromium")
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
              pytest.mark.slow]
EXPORTER = nbconvert.HTMLExporter()  # loads its templates once

# What the kernel knows: the kernel counts of the comparison each notebook ends with.
COUNTS_CELL = ("import json\n"
               "print(json.dumps([comparison.before.kernels, comparison.after.kernels, "
               "comparison.before.writes, comparison.after.writes]))")
# css pixels; the screenshot is taken at half that size, which keeps decoding it quick
WINDOW = (1280, 2400)


@pytest.mark.parametrize("notebook", demo.notebooks(), ids=lambda p: p.name)
def test_the_notebook_shows_its_plans_in_a_browser(notebook: Path, tmp_path: Path):
    executed, expected = execute(notebook)
    body, _ = EXPORTER.from_notebook_node(executed)
    page = tmp_path / "notebook.html"
    page.write_text(body, encoding="utf-8")
    dom, png = render(page, tmp_path)

    figures = Figures()
    figures.feed(dom)
    assert figures.plans, "no diagram in the rendered page"
    for plan in figures.plans:
        assert plan["drawn_kernels"] == plan["kernels"] > 0, plan
        assert plan["drawn_writes"] == plan["writes"], plan
        assert plan["lines"] >= 1 and plan["edges"] >= plan["boxes"], plan
    # the notebook ends with its comparison: the last two plans, side by side, are its two runs
    before, after = figures.plans[-2:]
    assert before["compare"] == after["compare"] is not None
    kernels_before, kernels_after, writes_before, writes_after = expected
    assert (before["drawn_kernels"], after["drawn_kernels"]) == (kernels_before, kernels_after)
    assert (before["drawn_writes"], after["drawn_writes"]) == (writes_before, writes_after)

    width, height, colours = png_colours(png)
    assert (width, height) == (WINDOW[0] // 2, WINDOW[1] // 2)
    assert len(colours) > 50, "a blank screenshot"
    fills = {bytes.fromhex(KIND_FILL[kind][1:]) for kind in figures.plans[0]["kinds"]}
    assert fills & colours, "the first diagram's kernel boxes are not painted"


def execute(notebook: Path) -> tuple[nbformat.NotebookNode, list[int]]:
    """The notebook run top to bottom in examples/, and what its comparison counted."""
    executed = nbformat.read(notebook, as_version=4)
    executed.cells.append(nbformat.v4.new_code_cell(COUNTS_CELL))
    NotebookClient(executed, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook.parent)}}).execute()
    printed = "".join(o.get("text", "") for o in executed.cells[-1].outputs if o.output_type == "stream")
    return executed, json.loads(printed)


def render(page: Path, tmp_path: Path) -> tuple[str, bytes]:
    """The DOM headless Chromium built from ``page``, and its screenshot (PNG), with no network."""
    screenshot = tmp_path / "screenshot.png"
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={WINDOW[0]},{WINDOW[1]}",
         "--force-device-scale-factor=0.5", f"--screenshot={screenshot}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, screenshot.read_bytes()


class Figures(HTMLParser):
    """Each ``fusionrt-plan`` in a page: what it says it holds, and what was drawn in it."""

    def __init__(self) -> None:
        super().__init__()
        self.plans: list[dict] = []
        self.compares = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        classes = attributes.get("class", "").split()
        if "fusionrt-compare" in classes:
            self.compares += 1
        if "fusionrt-plan" in classes:
            self.plans.append({
                "kernels": int(attributes["data-kernels"]), "writes": int(attributes["data-writes"]),
                "compare": self.compares if self._in_compare() else None, "drawn_kernels": 0, "drawn_writes": 0,
                "boxes": 0, "lines": 0, "edges": 0, "kinds": set(),
            })
        if not self.plans:
            return
        plan = self.plans[-1]
        if "fusionrt-kernel" in classes:
            plan["boxes"] += 1
            plan["kinds"].add(attributes["data-kind"])
        if "fusionrt-kernel" in classes or "fusionrt-more" in classes:
            plan["drawn_kernels"] += int(attributes["data-kernels"])
        if "fusionrt-write" in classes or "fusionrt-more" in classes:
            plan["drawn_writes"] += int(attributes["data-writes"])
        plan["lines"] += "fusionrt-line" in classes
        plan["edges"] += "fusionrt-line-edge" in classes

    def _in_compare(self) -> bool:
        """Whether the plan just opened sits in the last side-by-side block (it holds two plans)."""
        return self.compares > 0 and sum(p["compare"] == self.compares for p in self.plans) < 2


def png_colours(data: bytes) -> tuple[int, int, set[bytes]]:
    """Width, height and the distinct pixel colours of an 8-bit RGB or RGBA PNG, not interlaced."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = {}, 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        chunks[kind] = chunks.get(kind, b"") + data[offset + 8:offset + 8 + length]
        offset += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and colour_type in (2, 6) and interlace == 0
    pixel = 3 if colour_type == 2 else 4
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = width * pixel
    previous = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        unfilter(kind, row, previous, pixel)
        colours.update(bytes(row[x:x + 3]) for x in range(0, stride, pixel))
        previous = row
    return width, height, colours


def unfilter(kind: int, row: bytearray, previous: bytearray, pixel: int) -> None:
    """Undo one row's PNG filter in place (None, Sub, Up, Average, Paeth)."""
    if kind == 0:
        return
    if kind == 2:
        row[:] = bytes((a + b) & 0xFF for a, b in zip(row, previous))
        return
    for i in range(len(row)):
        left = row[i - pixel] if i >= pixel else 0
        up = previous[i]
        if kind == 1:
            row[i] = (row[i] + left) & 0xFF
        elif kind == 3:
            row[i] = (row[i] + (left + up) // 2) & 0xFF
        else:
            corner = previous[i - pixel] if i >= pixel else 0
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            row[i] = (row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
