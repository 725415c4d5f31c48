"""Render out/<stack>/report.html in headless Chromium and save a screenshot.

    python tools/render_report.py prod [--out docs/report-prod.png] [--width 1700 --height 2480]

Needs a Chromium binary (Debian: `apt-get install chromium`). Exits 2 with one line when there is none or
the report has not been planned yet; exits 1 when Chromium fails or writes no image.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    print(f"rendered {report} with {browser} into {image} ({image.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
