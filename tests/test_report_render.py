"""report.html renders in headless Chromium (runs where a Chromium binary is installed, else skipped)."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from components.offline.html_report import render_report
from components.offline.report_data import report_data
from components.planning.cluster_plan import plan_cluster
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
