"""Render out/<stack>/report.html in headless Chromium and save a screenshot.

    python tools/render_report.py prod [--out docs/report-prod.png] [--width 1700 --height 2480]

Needs a Chromium binary (Debian: `apt-get install chromium`). Exits 2 with one line when there is none or
the report has not been planned yet; exits 1 when Chromium fails or writes no image.

The PNG carries the digest of the stack's figures in tests/golden/stacks.json (a `tEXt` chunk,
`gpucluster-plan-digest`): tests/test_report_render.py fails when the picture shows figures other than the
current plan's, so a change that moves prod's figures re-renders docs/report-prod.png with this command.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


DIGEST_KEY = b"gpucluster-plan-digest"
GOLDEN = ROOT / "tests" / "golden" / "stacks.json"


def plan_digest(stack: str) -> str:
    """sha256 of the stack's figures in the golden file (the summary less outputs and dated keys)."""
    figures = json.loads(GOLDEN.read_text(encoding="utf-8"))[stack]
    return hashlib.sha256(json.dumps(figures, sort_keys=True).encode()).hexdigest()


def with_text(png: bytes, key: bytes, value: str) -> bytes:
    """`png` with a tEXt chunk (PNG spec 11.3.4.3: keyword, NUL, Latin-1 text) right after IHDR."""
    ihdr_end = len(PNG_MAGIC) + 8 + int.from_bytes(png[8:12], "big") + 4
    data = b"tEXt" + key + b"\0" + value.encode("latin-1")
    chunk = (len(data) - 4).to_bytes(4, "big") + data + zlib.crc32(data).to_bytes(4, "big")
    return png[:ihdr_end] + chunk + png[ihdr_end:]


def text_of(png: bytes, key: bytes) -> str | None:
    """The tEXt value under `key`, or None."""
    at = len(PNG_MAGIC)
    while at + 8 <= len(png):
        length, kind = int.from_bytes(png[at:at + 4], "big"), png[at + 4:at + 8]
        body = png[at + 8:at + 8 + length]
        if kind == b"tEXt" and body.startswith(key + b"\0"):
            return body[len(key) + 1:].decode("latin-1")
        if kind == b"IEND":
            return None
        at += 12 + length
    return None


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def render(report: Path, image: Path, width: int, height: int, browser: str) -> None:
    """Screenshot `report` into `image`. Raises RuntimeError when Chromium does not produce a PNG."""
    image.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", f"--screenshot={image}", report.resolve().as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0 or not image.is_file() or image.read_bytes()[:8] != PNG_MAGIC:
        raise RuntimeError(f"{browser} exited {result.returncode} without a PNG: {result.stderr.strip()[-400:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--out", help="PNG path (default docs/report-<stack>.png)")
    parser.add_argument("--width", type=int, default=1700)
    parser.add_argument("--height", type=int, default=2480)
    args = parser.parse_args(argv)
    report = ROOT / "out" / args.stack / "report.html"
    browser = find_browser()
    if browser is None:
        print("error: no Chromium found (looked for " + ", ".join(BROWSERS) + "); apt-get install chromium",
              file=sys.stderr)
        return 2
    if not report.is_file():
        print(f"error: {report} does not exist; run `make plan STACK={args.stack}` first", file=sys.stderr)
        return 2
    image = Path(args.out) if args.out else ROOT / "docs" / f"report-{args.stack}.png"
    try:
        render(report, image, args.width, args.height, browser)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    image.write_bytes(with_text(image.read_bytes(), DIGEST_KEY, plan_digest(args.stack)))
    print(f"rendered {report} with {browser} into {image} ({image.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
