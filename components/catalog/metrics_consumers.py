"""What the metrics pipeline's consumers accept (Prometheus' configuration keys and flags, node_exporter's and
kube-state-metrics' flags), read from components/catalog/facts/metrics_consumers.json, which
tools/extract_metrics_consumers.py writes from their sources at the pinned tags."""

from __future__ import annotations

from gpucluster.catalog.fact_files import load_facts

_FACTS = load_facts("metrics_consumers.json")

PROMETHEUS_TAG: str = _FACTS["PROMETHEUS_TAG"]
PROMETHEUS_COMMIT: str = _FACTS["PROMETHEUS_COMMIT"]
PROMETHEUS_COMMON_TAG: str = _FACTS["PROMETHEUS_COMMON_TAG"]
PROMETHEUS_COMMON_COMMIT: str = _FACTS["PROMETHEUS_COMMON_COMMIT"]
PROMETHEUS_CONFIG_KEYS: tuple[str, ...] = tuple(_FACTS["PROMETHEUS_CONFIG_KEYS"])
PROMETHEUS_RELABEL_ACTIONS: tuple[str, ...] = tuple(_FACTS["PROMETHEUS_RELABEL_ACTIONS"])
PROMETHEUS_KUBERNETES_ROLES: tuple[str, ...] = tuple(_FACTS["PROMETHEUS_KUBERNETES_ROLES"])
PROMETHEUS_FLAGS: tuple[str, ...] = tuple(_FACTS["PROMETHEUS_FLAGS"])
NODE_EXPORTER_COMMIT: str = _FACTS["NODE_EXPORTER_COMMIT"]
EXPORTER_TOOLKIT_TAG: str = _FACTS["EXPORTER_TOOLKIT_TAG"]
NODE_EXPORTER_FLAGS: tuple[str, ...] = tuple(_FACTS["NODE_EXPORTER_FLAGS"])
NODE_EXPORTER_KNOWN_COLLECTORS: tuple[str, ...] = tuple(_FACTS["NODE_EXPORTER_KNOWN_COLLECTORS"])
KSM_TAG: str = _FACTS["KSM_TAG"]
KSM_COMMIT: str = _FACTS["KSM_COMMIT"]
KSM_FLAGS: tuple[str, ...] = tuple(_FACTS["KSM_FLAGS"])
