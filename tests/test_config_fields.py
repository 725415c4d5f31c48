"""Every configuration document the boot documents write (KubeletConfiguration in kubeadm.yaml and the kubelet
patches, the credential provider config, the scheduler's KubeSchedulerConfiguration, the audit Policy) has only
fields its program's Go structs define at the pinned version (components/catalog/facts/consumers/config-*.json, read by
tools/extract_consumer_facts.py: kubernetes/kubelet, kubernetes/kube-scheduler and kubernetes/apiserver at
kubernetes-1.36.3, the nearest to the stacks' 1.36.4 in the mirrors). A field no struct defines is refused by a
strict decoder and ignored by a lenient one: either way the setting never takes effect. kubeadm's own documents
(kubeadm.k8s.io/v1beta4) live in kubernetes/kubernetes and are not read (docs/consumer-checks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.config_fields import config_schemas, unknown_config_fields


def _documents(out: Path) -> list[tuple[str, dict[str, Any]]]:
    """(boot document and file path, YAML document) of every file the boot documents write that parses as YAML
    documents with an apiVersion and kind."""
    found = []
    for boot in sorted((out / "boot").glob("*.yaml")):
        for file in yaml.safe_load(boot.read_text()).get("write_files") or []:
            try:
                docs = list(yaml.safe_load_all(file.get("content") or ""))
            except yaml.YAMLError:
                continue
            found += [(f"{boot.name}:{file['path']}", d) for d in docs
                      if isinstance(d, dict) and "apiVersion" in d and "kind" in d]
    return found


def test_every_configuration_document_has_only_known_fields(dev_out: Path) -> None:
    schemas = config_schemas()
    checked = set()
    for where, doc in _documents(dev_out):
        schema = schemas.get((doc["apiVersion"], doc["kind"]))
        if schema is None:
            continue
        assert unknown_config_fields(doc, schema) == [], where
        checked.add(schema["name"])
    assert checked == {"kubelet-configuration", "credential-provider-config", "kube-scheduler-configuration",
                       "audit-policy"}


def test_a_misspelt_kubelet_field_is_found() -> None:
    schema = config_schemas()[("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration")]
    patch = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "maxPods": 16,
             "serializeImagePull": False, "registerWithTaints": [{"key": "a", "effect": "NoSchedule"}]}
    assert unknown_config_fields(patch, schema) == ["serializeImagePull"]


def test_documents_no_catalogue_covers_are_only_kubeadms(dev_out: Path) -> None:
    """A new kind of configuration document fails here until its program's structs are read."""
    schemas = config_schemas()
    uncovered = {(d["apiVersion"], d["kind"]) for _, d in _documents(dev_out)
                 if (d["apiVersion"], d["kind"]) not in schemas}
    assert {api for api, _ in uncovered} <= {"kubeadm.k8s.io/v1beta4"}, uncovered
