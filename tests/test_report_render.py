"""report.html renders in headless Chromium (runs where a Chromium binary is installed, else skipped)."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.report.html_report import render_report
from gpucluster.report.report_data import report_data
from tools.render_report import find_browser, render

BROWSER = find_browser()


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (apt-get install chromium)")
def test_dev_report_renders(dev_spec, tmp_path: Path) -> None:
    assert BROWSER is not None
    report = tmp_path / "report.html"
    report.write_text(render_report(report_data(plan_cluster(dev_spec), "dev", Counter(), [])))
    image = tmp_path / "report.png"
    render(report, image, 1200, 900, BROWSER)
    width, height = struct.unpack(">II", image.read_bytes()[16:24])  # PNG IHDR
    assert (width, height) == (1200, 900)
    assert image.stat().st_size > 20_000  # a blank page compresses to a few kB


def test_the_pictured_prod_report_shows_the_current_plan() -> None:
    """docs/report-prod.png showed 222 resources and no node-images or API Priority and Fairness sections long after
    the plan had them: it carries the digest of prod's figures it was rendered from (tools/render_report.py)."""
    from tools.render_report import DIGEST_KEY, ROOT, plan_digest, text_of

    shown = text_of((ROOT / "docs" / "report-prod.png").read_bytes(), DIGEST_KEY)
    assert shown == plan_digest("prod"), ("docs/report-prod.png shows another plan than prod's current figures: run "
                                          "`make plan STACK=prod && python tools/render_report.py prod` and commit it")


def test_the_digest_chunk_round_trips(tmp_path: Path) -> None:
    from tools.render_report import DIGEST_KEY, PNG_MAGIC, text_of, with_text

    ihdr = b"IHDR" + struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    png = PNG_MAGIC + struct.pack(">I", 13) + ihdr + b"\0\0\0\0" + struct.pack(">I", 0) + b"IEND" + b"\0\0\0\0"
    assert text_of(png, DIGEST_KEY) is None
    assert text_of(with_text(png, DIGEST_KEY, "abc"), DIGEST_KEY) == "abc"
