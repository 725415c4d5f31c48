"""Extract the exporter facts the metrics budget rests on, from the exporters' sources at the pinned tags, into
components/catalog/facts/metrics_facts.json (generated: re-run after a version bump, review the diff), which
components/catalog/metrics_facts.py reads.

    python -m tools.extract_metrics_facts --dcgm-exporter DIR --go-dcgm DIR --node-exporter DIR

Each DIR is a git directory of the upstream repository (a clone or a snapshot: `git -C DIR` must work). Read:
- NVIDIA/dcgm-exporter at DCGM_EXPORTER_TAG: `etc/default-counters.csv` (the fields exported when no counter set is
  configured) and `go.mod` (the go-dcgm commit it builds with);
- NVIDIA/go-dcgm at that commit: `pkg/dcgm/const_fields.go`, the field names the exporter resolves a CSV line through;
- prometheus/node_exporter at NODE_EXPORTER_TAG: `collector/cpu_linux.go` (the per-CPU modes) and
  `collector/infiniband_linux.go` (the per-port metric names).
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from tools.facts_home import FACTS, generator_of, write_facts

DCGM_EXPORTER_TAG = "4.5.3-4.8.2"
"""The dcgm-exporter the GPU operator v26.3.3 runs (its values.yaml `dcgmExporter.version`: 4.5.3-4.8.2-distroless)."""
NODE_EXPORTER_TAG = "v1.12.1"
OUT = FACTS / "metrics_facts.json"
SOURCES = "NVIDIA/dcgm-exporter, NVIDIA/go-dcgm and prometheus/node_exporter, at the tags and commits recorded here"


def show(repo: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def commit(repo: Path, rev: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", f"{rev}^{{commit}}"], check=True,
                          capture_output=True, text=True).stdout.strip()


def csv_counters(text: str) -> list[tuple[str, str]]:
    """`FIELD, type, help` lines; `#` starts a comment (dcgm-exporter's CSV format)."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        field, kind = (part.strip() for part in line.split(",")[:2])
        rows.append((field, kind))
    return rows


def go_dcgm_commit(go_mod: str) -> str:
    match = re.search(r"github\.com/NVIDIA/go-dcgm v[0-9.]+-[0-9]+-([0-9a-f]{12})", go_mod)
    if match is None:
        raise SystemExit("dcgm-exporter go.mod: no pseudo-version of github.com/NVIDIA/go-dcgm")
    return match.group(1)


def dcgm_field_names(const_fields: str) -> list[str]:
    return sorted(set(re.findall(r'^\s*"(DCGM_FI_[A-Z0-9_]+)":\s*\d+,', const_fields, re.MULTILINE)))


def cpu_modes(cpu_linux: str) -> tuple[list[str], list[str]]:
    """The `mode` label values of node_cpu_seconds_total (c.cpu) and node_cpu_guest_seconds_total (c.cpuGuest)."""
    cpu = re.findall(r"MustNewConstMetric\(c\.cpu, prometheus\.CounterValue, cpuStat\.\w+, cpuNum, \"(\w+)\"\)",
                     cpu_linux)
    guest = re.findall(r"MustNewConstMetric\(c\.cpuGuest, prometheus\.CounterValue, cpuStat\.\w+, cpuNum, \"(\w+)\"\)",
                       cpu_linux)
    return cpu, guest


def infiniband_metrics(infiniband_linux: str) -> list[str]:
    block = infiniband_linux.split("descriptions := map[string]string{", 1)[1].split("\n\t}\n", 1)[0]
    return sorted(set(re.findall(r'^\s*"([a-z0-9_]+)":', block, re.MULTILINE)))


def write(out: Path, generator: str, sources: str, facts: dict[str, object]) -> None:
    """The facts as JSON, each under the name its reader in components/catalog/ exposes (lists become tuples there)."""
    write_facts(out, generator, {"sources": sources, **facts}, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dcgm-exporter", type=Path, required=True)
    parser.add_argument("--go-dcgm", type=Path, required=True)
    parser.add_argument("--node-exporter", type=Path, required=True)
    args = parser.parse_args()
    go_dcgm = commit(args.go_dcgm, go_dcgm_commit(show(args.dcgm_exporter, DCGM_EXPORTER_TAG, "go.mod")))
    cpu, guest = cpu_modes(show(args.node_exporter, NODE_EXPORTER_TAG, "collector/cpu_linux.go"))
    facts: dict[str, object] = {
        "DCGM_EXPORTER_TAG": DCGM_EXPORTER_TAG,
        "DCGM_EXPORTER_COMMIT": commit(args.dcgm_exporter, DCGM_EXPORTER_TAG),
        "DCGM_DEFAULT_COUNTERS": [tuple(row) for row in
                                  csv_counters(show(args.dcgm_exporter, DCGM_EXPORTER_TAG, "etc/default-counters.csv"))],
        "GO_DCGM_COMMIT": go_dcgm,
        "DCGM_FIELD_NAMES": dcgm_field_names(show(args.go_dcgm, go_dcgm, "pkg/dcgm/const_fields.go")),
        "NODE_EXPORTER_TAG": NODE_EXPORTER_TAG,
        "NODE_EXPORTER_COMMIT": commit(args.node_exporter, NODE_EXPORTER_TAG),
        "NODE_CPU_MODES": cpu,
        "NODE_CPU_GUEST_MODES": guest,
        "NODE_INFINIBAND_PORT_METRICS": infiniband_metrics(
            show(args.node_exporter, NODE_EXPORTER_TAG, "collector/infiniband_linux.go")),
    }
    write(OUT, generator_of(__file__), SOURCES, facts)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
