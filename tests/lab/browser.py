"""Open a local HTML file in Debian's chromium, headless, as root, with nothing reaching the network.

    page = open_page(path)   -> Page(dom, console, pixels)
      dom      the DOM after load (--dump-dom)
      console  the console messages chromium logged (a page without script has none; a resource it could
               not load or a script error shows here)
      pixels   {(r, g, b): count} of a screenshot (--screenshot), to prove the SVG was drawn
Each run gets a fresh --user-data-dir, removed afterwards.
"""
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections import Counter, namedtuple
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE(?::\d+)?\] (.*)$", re.M)
Page = namedtuple("Page", "dom console pixels")


def chromium():
    path = shutil.which("chromium")
    if not path:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium; scripts/lib.sh APT_PACKAGES)")
    return path


def _run(args, profile, timeout):
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def png_pixels(data):
    """{(r, g, b): count} of an 8-bit RGB/RGBA, non-interlaced PNG (what chromium writes), stdlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    width, height, depth, color, _c, _f, interlace = head
    assert depth == 8 and color in (2, 6) and interlace == 0, head
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, out, i = bytearray(stride), Counter(), 0
    for _row in range(height):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        out.update(tuple(line[x:x + 3]) for x in range(0, stride, bpp))
        prev = line
    return out


def open_page(path, timeout=90, size=(1000, 2400)):
    url = Path(path).resolve().as_uri()
    profile = tempfile.mkdtemp(prefix="bench-chromium-")
    try:
        r = _run(["--dump-dom", url], profile, timeout)
        if r.returncode != 0:
            raise RuntimeError(f"chromium --dump-dom failed (rc {r.returncode}): {r.stderr[-2000:]}")
        console = CONSOLE.findall(r.stderr)
        shot = Path(profile) / "page.png"
        s = _run([f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}", "--hide-scrollbars", url], profile,
                 timeout)
        if s.returncode != 0 or not shot.exists():
            raise RuntimeError(f"chromium --screenshot failed (rc {s.returncode}): {s.stderr[-2000:]}")
        return Page(r.stdout, console + CONSOLE.findall(s.stderr), png_pixels(shot.read_bytes()))
    finally:
        shutil.rmtree(profile, ignore_errors=True)
