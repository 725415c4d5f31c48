"""The YAML a plan reads and writes on its own paths goes through libyaml (PyYAML's `CSafeLoader`/`CSafeDumper`):
the pure-Python reader and emitter cost `plan` about half a second of CPU in prod (docs/performance.md), and the
values and bytes are the same as `yaml.safe_load` / `yaml.safe_dump` give (checked here on the shipped stacks)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpucluster.bake import manifest
from gpucluster.bootstrap import cloud_config
from gpucluster.kubernetes.objects import imds_guard
from gpucluster.kubernetes.objects.layer import layer_objects, telemetry_objects
from gpucluster.offline.boot_docs import boot_documents, document_images, missing_image_files
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from tests.support.stacks import stack_spec

STACKS = ("dev", "prod", "gb300")


@pytest.fixture(scope="module")
def plans() -> dict[str, ClusterPlan]:
    return {stack: plan_cluster(stack_spec(stack)) for stack in STACKS}


@pytest.fixture
def pure_python(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How many pure-Python readers and emitters PyYAML builds (libyaml's are C types, outside these classes)."""
    built: Counter[str] = Counter()
    for name, cls in (("reader", yaml.reader.Reader), ("emitter", yaml.emitter.Emitter)):
        original = cls.__init__

        def counting(self: Any, *args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> None:
            built[_name] += 1
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    imds_guard._prometheus_signs_in.cache_clear()
    yield built


def test_the_layer_objects_and_the_image_check_use_no_pure_python_yaml(plans: dict[str, ClusterPlan],
                                                                        pure_python: Counter[str]) -> None:
    plan = plans["prod"]
    layer_objects(plan)
    missing_image_files(plan, boot_documents(plan))
    assert pure_python == Counter()


def test_a_prometheus_config_is_read_once_per_text(plans: dict[str, ClusterPlan], pure_python: Counter[str]) -> None:
    layer_objects(plans["prod"])
    first = imds_guard._prometheus_signs_in.cache_info()
    layer_objects(plans["prod"])  # the program, the simulation and the architecture check each ask
    assert first.misses > 0 and imds_guard._prometheus_signs_in.cache_info().misses == first.misses


@pytest.mark.parametrize("stack", STACKS)
def test_libyaml_reads_the_boot_documents_as_safe_load_does(plans: dict[str, ClusterPlan], stack: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plans[stack]
    documents = boot_documents(plan)
    for text in documents.values():
        assert yaml.load(text, Loader=manifest._LOADER) == yaml.safe_load(text)
    images = document_images(plan)
    fast = {name: manifest.missing_files(text, images[name]) for name, text in documents.items()}
    monkeypatch.setattr(manifest, "_LOADER", yaml.SafeLoader)
    assert {name: manifest.missing_files(text, images[name]) for name, text in documents.items()} == fast


@pytest.mark.parametrize("stack", STACKS)
def test_libyaml_writes_the_prometheus_configs_byte_for_byte(plans: dict[str, ClusterPlan], stack: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plans[stack]
    if plan.metrics is None:
        pytest.skip(f"{stack} plans no metrics pipeline")
    fast = telemetry_objects(plan, "https://write.example/api/v1/write", "client-id")
    monkeypatch.setattr(cloud_config, "EMITTER", yaml.SafeDumper)
    assert telemetry_objects(plan, "https://write.example/api/v1/write", "client-id") == fast
    configs = [o for o in fast if o["kind"] == "ConfigMap"]
    assert configs and all(isinstance(text, str) and text for o in configs for text in o["data"].values())
