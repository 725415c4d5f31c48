"""What the plan renders, against what Kubernetes minors removed (components/catalog/removals.py, with its sources:
kubernetes/website deprecation-guide.md, KEP-2067, CHANGELOG-1.24.md). Reddit's 1.24 outage came from a selector on
the `node-role.kubernetes.io/master` label kubeadm stopped applying."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster.offline.boot_docs import boot_documents
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.manifests import helm_releases, kubernetes_objects
from gpucluster.offline.removals import KEY, find_uses, removal_problems, removals_data, removals_line
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.spec import ClusterSpec


@pytest.fixture(scope="module")
def rendered(prod_run: ProgramRun, prod_spec: ClusterSpec) -> tuple[list[Any], list[Any], dict[str, str]]:
    return (kubernetes_objects(prod_run.registrations), helm_releases(prod_run.registrations),
            boot_documents(plan_cluster(prod_spec)))


def test_prod_renders_nothing_its_minor_or_the_next_removed(rendered: tuple[list[Any], list[Any], dict[str, str]]
                                                             ) -> None:
    objects, releases, boot = rendered
    assert objects and releases and boot
    assert find_uses(objects, releases, boot) == []


def test_an_api_version_the_minor_no_longer_serves_is_a_plan_error(
        rendered: tuple[list[Any], list[Any], dict[str, str]]) -> None:
    objects, releases, boot = rendered
    schema = copy.deepcopy(next(o for o in objects if o["kind"] == "FlowSchema"))
    schema["apiVersion"] = "flowcontrol.apiserver.k8s.io/v1beta3"
    uses = find_uses([*objects, schema], releases, boot)
    [problem] = removal_problems(uses, "1.36.4")
    assert problem.path == "cluster.kubernetesVersion"
    assert f"FlowSchema {schema['metadata']['name']}" in problem.message
    assert "Kubernetes 1.32 removed" in problem.message and "flowcontrol.apiserver.k8s.io/v1" in problem.message
    assert removal_problems(uses, "1.31.0") == []  # still served by 1.31
    assert removals_data(uses, "1.31.0")["uses"][0]["what"] == "apiVersion flowcontrol.apiserver.k8s.io/v1beta3"


def test_a_selector_on_the_removed_master_label_is_caught(rendered: tuple[list[Any], list[Any], dict[str, str]]
                                                         ) -> None:
    objects = rendered[0]
    dns = copy.deepcopy(next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "coredns"))
    dns["spec"]["template"]["spec"]["nodeSelector"] = {"node-role.kubernetes.io/master": ""}
    [use] = find_uses([dns], [], {})
    assert use.what == "label node-role.kubernetes.io/master" and use.removal.removed_in == "1.24"
    assert "KEP-2067" in removal_problems([use], "1.36.4")[0].message
    # the current label is not the removed one
    dns["spec"]["template"]["spec"]["nodeSelector"] = {"node-role.kubernetes.io/control-plane": ""}
    assert find_uses([dns], [], {}) == []


def test_removed_flags_are_matched_whole(rendered: tuple[list[Any], list[Any], dict[str, str]]) -> None:
    _, _, boot = rendered
    name, text = next(iter(boot.items()))
    [use] = find_uses([], [], {name: text + "\nKUBELET_EXTRA_ARGS=--network-plugin=cni\n"})
    assert use.what == "flag --network-plugin" and use.where == f"boot document {name}"
    assert find_uses([], [], {name: "--container-runtime-endpoint=unix:///run/containerd/containerd.sock"}) == []
    assert [u.what for u in find_uses([], [{"release": "x", "values": {"args": ["--cni-bin-dir=/opt"]}}], {})] == [
        "flag --cni-bin-dir"]


def test_the_summary_names_the_next_minor_and_admits_an_unread_catalogue(dev_out: Path) -> None:
    data = json.loads((dev_out / "summary.json").read_text())[KEY]
    assert data["nextMinor"] == "1.37" and data["uses"] == []
    assert not data["catalogueCovers"]
    assert "not in the catalogue yet" in removals_line(data)
    covered = {**data, "catalogueCovers": True}
    assert removals_line(covered) == "Before upgrading to Kubernetes 1.37: nothing rendered uses what it removes"
