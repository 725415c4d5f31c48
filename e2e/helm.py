"""Charts as the real helm renders them (`helm template`), from the chart sources in the Go module proxy's copy of
each project at its pinned tag: no chart repository is reachable here, and the module holds the same chart folder
the release packages."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from e2e.consumers import binary


def template(release: str, namespace: str, chart: Path, values: dict[str, Any], work: Path,
             api_versions: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    work.mkdir(parents=True, exist_ok=True)
    values_file = work / f"{release}-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    args = [str(binary("helm")), "template", release, str(chart), "--namespace", namespace, "--include-crds",
            "--values", str(values_file)]
    for api in api_versions:
        args += ["--api-versions", api]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300,
                            env={"HOME": str(work), "HELM_CACHE_HOME": str(work / "helm-cache"),
                                 "HELM_CONFIG_HOME": str(work / "helm-config"), "HELM_DATA_HOME": str(work / "helm-data"),
                                 "PATH": "/usr/bin:/bin"})
    if result.returncode != 0:
        raise RuntimeError(f"helm template {release} failed (exit {result.returncode}): {result.stderr.strip()}")
    return [d for d in yaml.safe_load_all(result.stdout) if d]
