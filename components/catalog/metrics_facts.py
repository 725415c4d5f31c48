"""The exporter facts the metrics budget rests on, read from components/catalog/facts/metrics_facts.json, which
tools/extract_metrics_facts.py writes from dcgm-exporter's, go-dcgm's and node_exporter's sources at the pinned tags."""

from __future__ import annotations

from gpucluster.catalog.fact_files import load_facts

_FACTS = load_facts("metrics_facts.json")

DCGM_EXPORTER_TAG: str = _FACTS["DCGM_EXPORTER_TAG"]
DCGM_EXPORTER_COMMIT: str = _FACTS["DCGM_EXPORTER_COMMIT"]
DCGM_DEFAULT_COUNTERS: tuple[tuple[str, str], ...] = tuple((field, kind)
                                                           for field, kind in _FACTS["DCGM_DEFAULT_COUNTERS"])
"""(DCGM field, Prometheus metric type) of each line of dcgm-exporter's etc/default-counters.csv, in its order."""
GO_DCGM_COMMIT: str = _FACTS["GO_DCGM_COMMIT"]
DCGM_FIELD_NAMES: tuple[str, ...] = tuple(_FACTS["DCGM_FIELD_NAMES"])
NODE_EXPORTER_TAG: str = _FACTS["NODE_EXPORTER_TAG"]
NODE_EXPORTER_COMMIT: str = _FACTS["NODE_EXPORTER_COMMIT"]
NODE_CPU_MODES: tuple[str, ...] = tuple(_FACTS["NODE_CPU_MODES"])
NODE_CPU_GUEST_MODES: tuple[str, ...] = tuple(_FACTS["NODE_CPU_GUEST_MODES"])
NODE_INFINIBAND_PORT_METRICS: tuple[str, ...] = tuple(_FACTS["NODE_INFINIBAND_PORT_METRICS"])
