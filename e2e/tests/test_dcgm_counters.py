"""The counters file the GPU operator's chart hands dcgm-exporter (`dcgmExporter.config.data`, as `gpucluster plan`
writes it to out/<stack>/charts/), read with the exporter's own rules (Go's encoding/csv, e2e/consumers/dcgm-counters):
the exporter exits at start-up on a file it refuses, on every GPU node at once."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from e2e.consumers import binary
from e2e.report import E2EReport
from gpucluster.catalog.metrics import TRAINING_COUNTERS


def _counters_file(out: Path) -> str:
    for path in sorted((out / "charts").glob("*")):
        values: Any = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") else None
        found = _find_config(values)
        if found is not None:
            return found
    raise AssertionError(f"no dcgmExporter.config.data in {out / 'charts'}")


def _find_config(node: Any) -> str | None:
    if isinstance(node, dict):
        exporter = node.get("dcgmExporter")
        if isinstance(exporter, dict) and isinstance(exporter.get("config"), dict) and "data" in exporter["config"]:
            return exporter["config"]["data"]
        return next((f for v in node.values() if (f := _find_config(v)) is not None), None)
    if isinstance(node, list):
        return next((f for v in node if (f := _find_config(v)) is not None), None)
    return None


def _read(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "counters.csv"
    path.write_text(text)
    return subprocess.run([str(binary("dcgm-counters")), str(path)], capture_output=True, text=True, timeout=60)


def test_the_exporter_reads_the_rendered_counters_file(dev_out: Path, tmp_path: Path, report: E2EReport) -> None:
    result = _read(tmp_path, _counters_file(dev_out))
    report.scenario("dcgm-exporter reads the rendered counters file", "passed" if result.returncode == 0 else "failed",
                    counters=len(result.stdout.splitlines()), refused=result.stderr.strip())
    assert result.returncode == 0, result.stderr
    read = [line.split("\t") for line in result.stdout.splitlines()]
    assert [(f, k, h) for f, k, h in read] == [(c.field, c.kind, c.help) for c in TRAINING_COUNTERS]


def test_the_reader_refuses_a_help_text_with_a_bare_comma(tmp_path: Path) -> None:
    """The reader is as strict as the exporter: a help text with an unquoted comma, as the file was rendered before
    it was quoted, is refused; so is a quote after the space that follows a comma."""
    first = TRAINING_COUNTERS[0]
    bare = _read(tmp_path, f"{first.field}, {first.kind}, clock\n{first.field}, {first.kind}, clock, in MHz\n")
    assert bare.returncode == 1 and "wrong number of fields" in bare.stderr, bare.stderr
    spaced = _read(tmp_path, f'{first.field}, {first.kind}, "clock, in MHz"\n')
    assert spaced.returncode == 1 and "bare \" in non-quoted-field" in spaced.stderr, spaced.stderr
