"""The control plane dev's API-server boot document renders, run for real: versions, flags, audit policy, and the
in-cluster layer applied to it in Pulumi's order, judged by the real admission chain."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from e2e import control_plane as cp
from e2e.cluster import Stack, kubectl
from e2e.consumers import CONSUMERS, install_dir
from e2e.report import E2EReport

EXPECTED_REFUSALS = ("CiliumClusterwideNetworkPolicy",)
"""Kinds whose CRD only a running component registers (cilium-operator creates Cilium's CRDs itself; README,
out/<stack>/manifests/): refused here with 'no matches for kind', as on a cluster before Cilium's operator runs."""


def test_every_consumer_reports_its_pinned_version(report: E2EReport) -> None:
    wrong = {}
    for consumer in CONSUMERS:
        record = json.loads((install_dir(consumer) / "build.json").read_text())
        if consumer.version_args and consumer.version.lstrip("v") not in record["reports"]:
            wrong[consumer.name] = record["reports"]
    report.scenario("consumers report their pinned versions", "failed" if wrong else "passed", wrong=wrong)
    assert not wrong


def test_the_api_server_serves_the_stacks_version(control_plane: cp.ControlPlane, dev_out: Path) -> None:
    version = cp.json_get(control_plane, "/version")
    documents = list(yaml.safe_load_all(cp.rendered_files(dev_out / "boot" / "apiserver.yaml")[cp.KUBEADM_CONFIG]))
    cluster = next(d for d in documents if d["kind"] == "ClusterConfiguration")
    assert version["gitVersion"] == cluster["kubernetesVersion"]


def test_the_api_server_runs_every_rendered_flag(control_plane: cp.ControlPlane, dev_out: Path, report: E2EReport) -> None:
    documents = list(yaml.safe_load_all(cp.rendered_files(dev_out / "boot" / "apiserver.yaml")[cp.KUBEADM_CONFIG]))
    cluster = next(d for d in documents if d["kind"] == "ClusterConfiguration")
    running = control_plane.program("kube-apiserver").args
    local = cp.Localiser(control_plane.work)
    missing = [a["name"] for a in cluster["apiServer"]["extraArgs"]
               if a["name"] != "etcd-servers-overrides" and f"--{a['name']}={local.arg(a['value'])}" not in running]
    report.scenario("kube-apiserver runs the rendered flags", "failed" if missing else "passed",
                    flags=[a["name"] for a in cluster["apiServer"]["extraArgs"]], missing=missing)
    assert not missing
    if any(a["name"] == "etcd-servers-overrides" for a in cluster["apiServer"]["extraArgs"]):
        assert any(a.startswith("--etcd-servers-overrides=/events#") for a in running)


def test_the_audit_policy_records_a_configmap_write_at_metadata(control_plane: cp.ControlPlane, report: E2EReport) -> None:
    name = f"audit-probe-{time.monotonic_ns()}"
    made = kubectl(control_plane, "create", "configmap", name, "-n", "default", "--from-literal=k=v")
    assert made.returncode == 0, made.stderr
    log = Path(cp.Localiser(control_plane.work).path("/var/log/kubernetes/audit.log"))

    def entry() -> dict[str, object] | None:
        if not log.exists():
            return None
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("objectRef", {}).get("name") == name and event["verb"] == "create":
                return event
        return None

    cp.wait_until(lambda: entry() is not None, 60, "the audit entry")
    event = entry()
    assert event is not None and event["level"] == "Metadata" and "requestObject" not in event
    report.scenario("the rendered audit policy records a ConfigMap write at Metadata", "passed")


def test_every_object_is_admitted_but_those_waiting_for_a_running_component(dev_stack: Stack, report: E2EReport) -> None:
    unexpected = {k: v for k, v in dev_stack.applied.refused.items()
                  if not any(f" {kind}/" in k for kind in EXPECTED_REFUSALS)}
    report.scenario("dev's manifests and Kueue's chart applied in Pulumi's order", "failed" if unexpected else "passed",
                    applied=len(dev_stack.applied.applied), refused=sorted(dev_stack.applied.refused),
                    not_applied=dev_stack.applied.skipped)
    assert not unexpected
    assert len(dev_stack.applied.applied) > 100


def test_the_vendored_provisioning_request_crd_is_the_one_the_stacks_name(dev_out: Path) -> None:
    """make e2e applies e2e/data/provisioningrequests.yaml where `pulumi up` fetches the URL the Kueue release's
    annotation names: the same tag and path."""
    release = yaml.safe_load((dev_out / "charts" / "dev-in-cluster-scheduling-kueue.yaml").read_text())
    url = release["values"]["controllerManager"]["manager"]["podAnnotations"]["gpucluster.io/provisioning-request-api"]
    header = (Path(__file__).resolve().parents[1] / "data" / "provisioningrequests.yaml").read_text().splitlines()[:2]
    tag, path = url.split("/autoscaler/", 1)[1].split("/", 1)
    assert tag in header[0] and path in header[1], (url, header)
