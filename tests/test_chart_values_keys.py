"""Every Helm values key we render exists in the chart we pin: in its values.yaml (with its vendored subcharts'
values under their names), or read by one of its templates as `.Values.<path>`. Catalogues written by
tools/extract_consumer_facts.py from the charts at the pinned tags (components/catalog/facts/consumers/values-*.json, each with
repository, tag and commit). Helm does not refuse an unknown key: it is ignored, and the setting we believe in never
reaches the cluster.

Under a key whose chart default is an empty map, null, or a map keyed by labels (a nodeSelector), any key is free;
a list or a scalar is replaced whole. A map where the chart has a scalar is a mismatch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.kubernetes.objects.charts import gpu_operator_values
from gpucluster.kubernetes.objects.images import serve_chart_values
from gpucluster.kubernetes.objects.kueue import kueue_chart_values
from gpucluster.kubernetes.objects.rack_dra import dra_driver_values, dranet_values
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from tests.support.config_fields import config_schema, unknown_config_fields
from tests.support.stacks import stack_spec
from tools.facts_home import CONSUMERS

CATALOGUES = CONSUMERS


def facts(chart: str) -> dict[str, Any]:
    return json.loads((CATALOGUES / f"values-{chart}.json").read_text())


def unknown_keys(values: dict[str, Any], chart: str) -> list[str]:
    known = facts(chart)
    keys: dict[str, str] = known["keys"]
    reads = set(known["template_reads"])
    found: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            kind = keys.get(here)
            if kind is None:
                if here not in reads and not any(r.startswith(f"{here}.") for r in reads):
                    found.append(here)
            elif kind == "map" and isinstance(value, dict):
                walk(value, here)
            elif kind == "scalar" and isinstance(value, dict):
                found.append(f"{here} (a map where the chart has a scalar)")

    walk(values, "")
    return found


def _planned(out: Path) -> dict[str, dict[str, Any]]:
    releases = [yaml.safe_load(p.read_text()) for p in sorted((out / "charts").glob("*.yaml"))]
    return {r["name"]: r["values"] for r in releases}


@pytest.fixture(scope="module")
def gb300() -> ClusterPlan:
    return plan_cluster(stack_spec("gb300"))


def test_the_planned_releases_use_only_keys_their_charts_have(dev_out: Path) -> None:
    planned = _planned(dev_out)
    assert set(planned) == {"cilium", "kueue", "gpu-operator"}
    assert {chart: unknown_keys(values, chart) for chart, values in planned.items()} == {
        "cilium": [], "kueue": [], "gpu-operator": []}


def test_rack_clusters_values_use_only_keys_their_charts_have(gb300: ClusterPlan) -> None:
    rendered = {
        "nvidia-dra-driver-gpu": serve_chart_values("nvidia-dra-driver-gpu", dra_driver_values(gb300.pools),
                                                    gb300.registry),
        "dranet": serve_chart_values("dranet", dranet_values(gb300.pools), gb300.registry),
        "gpu-operator": serve_chart_values("gpu-operator", gpu_operator_values(racks=True), gb300.registry),
        "kueue": serve_chart_values("kueue", kueue_chart_values(10, "crd", racks=True), gb300.registry),
    }
    assert {chart: unknown_keys(values, chart) for chart, values in rendered.items()} == {
        chart: [] for chart in rendered}


def test_an_unknown_key_is_found() -> None:
    """A misspelt key (and one nested under a real one) is reported; a label under a nodeSelector is not."""
    values = {"operator": {"nodeSelector": {"gpucluster.io/role": "system"}, "replica": 2},
              "ipam": {"mode": "crd"}, "ipamMode": "crd"}
    assert unknown_keys(values, "cilium") == ["operator.replica", "ipamMode"]


def test_a_map_where_the_chart_has_a_scalar_is_found() -> None:
    assert unknown_keys({"ipam": {"mode": {"crd": True}}}, "cilium") == [
        "ipam.mode (a map where the chart has a scalar)"]


def test_the_catalogues_name_their_sources() -> None:
    for path in CATALOGUES.glob("values-*.json"):
        known = json.loads(path.read_text())
        assert len(known["commit"]) == 40 and known["tag"] and known["keys"] and known["template_reads"]


def _kueue_config(values: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])


def test_kueues_configuration_has_only_fields_its_strict_decoder_knows(dev_out: Path, gb300: ClusterPlan) -> None:
    """kueue v0.19.2 pkg/config/config.go decodes with serializer.EnableStrict: an unknown field stops it."""
    schema = config_schema("kueue-configuration")
    dev = _kueue_config(_planned(dev_out)["kueue"])
    racks = _kueue_config(kueue_chart_values(10, "crd", racks=True))
    assert dev["managedJobsNamespaceSelector"] and racks["resources"]["deviceClassMappings"]
    assert unknown_config_fields(dev, schema) == [] and unknown_config_fields(racks, schema) == []


def test_a_misspelt_kueue_field_is_found() -> None:
    schema = config_schema("kueue-configuration")
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "leaderElection": {"leaderElect": True, "resourceNam": "x"},
              "managedJobsNamespaceSelector": {"matchExpression": []},
              "resources": {"deviceClassMappings": [{"name": "a", "deviceClassName": ["b"]}]},
              "waitForPodsReady": {"timeout": "10m"}}
    assert unknown_config_fields(config, schema) == [
        "leaderElection.resourceNam", "managedJobsNamespaceSelector.matchExpression",
        "resources.deviceClassMappings[0].deviceClassName"]
