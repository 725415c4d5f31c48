"""The shipped stacks' metrics budget in docs/metrics.md, from the planner (tests/test_metrics_doc.py fails when the
page and the code disagree):

    python -m tools.metrics_doc
"""

from __future__ import annotations

from pathlib import Path

from gpucluster.catalog.metrics import EDGE_REPLICAS
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.spec import load_stack_file
from tools.generated_section import with_section

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "metrics.md"
BEGIN, END = "<!-- metrics-figures:begin -->", "<!-- metrics-figures:end -->"
STACKS = ("dev", "prod", "gb300")


def figures_table() -> str:
    rows = ["| stack | raw series at the edge | shards x replicas | written series | written samples/min | "
            "largest metric (series) | dcgm-exporter default set would be |",
            "|---|---:|---:|---:|---:|---|---:|"]
    for stack in STACKS:
        metrics = plan_cluster(load_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml", stack).spec).metrics
        assert metrics is not None
        largest = metrics.largest
        rows.append(f"| {stack} | {metrics.raw_series:,} | {metrics.shards} x {EDGE_REPLICAS} | {metrics.ingested_series:,} | "
                    f"{metrics.ingested_samples_per_minute:,} | `{largest.metric}` ({largest.series:,}) | "
                    f"{metrics.dcgm_default_series:,} |")
    return "\n".join(rows)


def rendered(text: str) -> str:
    return with_section(text, BEGIN, END, figures_table())


def main() -> None:
    from gpucluster.offline.mock_values import name_registries_offline

    name_registries_offline()
    DOC.write_text(rendered(DOC.read_text()))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
