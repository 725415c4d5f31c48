"""kwok in place of kubelets: Nodes registered as the stack's machines register (the labels and taints their
rendered boot documents give the kubelet, the capacity their VM size has) and pods that start and finish by kwok's
own fast stages.

A node's boot document (out/<stack>/boot/pool-<pool>-<scale set>.yaml) holds the kubelet's `node-labels` (the
kubeadm JoinConfiguration) and `registerWithTaints` (the KubeletConfiguration patch); what the kubelet adds itself
(hostname, os, arch) is added here as the kubelet adds it.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.consumers import binary, by_name, install_dir
from e2e.control_plane import ControlPlane
from e2e.processes import Program
from gpucluster.catalog.in_cluster import RDMA_HCA_MAX, RDMA_RESOURCE
from gpucluster.planning.cluster_plan import ClusterPlan


def complete_after(duration: str) -> dict[str, str]:
    """Pod annotations that make kwok's general pod-complete stage finish the pod after `duration`. The jitter-delay
    is the stage's longest wait: a jitter at or under the delay is the wait itself (kwok v0.8.0
    pkg/utils/lifecycle/lifecycle.go `Stage.Delay`), and the stage's own jitter is 5 s, so both are set."""
    return {"pod-complete.stage.kwok.x-k8s.io/delay": duration, "pod-complete.stage.kwok.x-k8s.io/jitter-delay": duration}


KWOK_ANNOTATION = "kwok.x-k8s.io/node"
PROVIDER_ID = ("azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/{}/"
               "virtualMachines/{}")
"""A node's providerID as cloud-provider-azure sets it for a scale-set VM (`azure://` + the VM's resource id), with
the subscription `sub` and group `rg` the fake ARM of tests/support/rollout_world.py answers for."""
"""The annotation kwok manages nodes by (its --manage-nodes-with-annotation-selector)."""


@dataclass(frozen=True)
class NodeTemplate:
    pool: str
    scale_set: str
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...]
    capacity: dict[str, str]

    def node(self, index: int) -> dict[str, Any]:
        name = f"{self.scale_set}-{index:06d}"
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"},
                         "labels": {**self.labels, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64"}},
            "spec": {"taints": [dict(t) for t in self.taints],
                     "providerID": PROVIDER_ID.format(self.scale_set, index)},
            "status": {"capacity": self.capacity, "allocatable": self.capacity},
        }


def _boot_files(document: Path) -> dict[str, str]:
    return {f["path"]: f.get("content", "") for f in yaml.safe_load(document.read_text())["write_files"]}


def _join_labels(files: dict[str, str]) -> dict[str, str]:
    join = next(d for p, c in files.items() if p.endswith("kubeadm-join.yaml") for d in yaml.safe_load_all(c)
                if d and d.get("kind") == "JoinConfiguration")
    value = next(a["value"] for a in join["nodeRegistration"]["kubeletExtraArgs"] if a["name"] == "node-labels")
    return dict(pair.split("=", 1) for pair in value.split(",") if pair)


def _kubelet_patch(files: dict[str, str]) -> dict[str, Any]:
    return next(yaml.safe_load(c) for p, c in files.items() if "/patches/kubeletconfiguration" in p)


def node_templates(plan: ClusterPlan, out: Path) -> Iterator[tuple[NodeTemplate, int]]:
    """Each scale set's template and its planned node count."""
    for pool in plan.pools:
        for scale_set in pool.scale_sets:
            files = _boot_files(out / "boot" / f"pool-{pool.name}-{scale_set.name}.yaml")
            patch = _kubelet_patch(files)
            capacity = {"cpu": str(pool.size.vcpus), "memory": f"{pool.size.memory_gib}Gi",
                        "pods": str(patch["maxPods"]), "ephemeral-storage": "100Gi"}
            if pool.size.gpus:
                capacity["nvidia.com/gpu"] = str(pool.size.gpus)
            if scale_set.infiniband:
                capacity[RDMA_RESOURCE] = str(RDMA_HCA_MAX)
            yield NodeTemplate(pool.name, scale_set.name, _join_labels(files),
                               tuple({k: v for k, v in t.items() if v != ""} for t in patch.get("registerWithTaints", [])),
                               capacity), scale_set.capacity


def start_kwok(kubeconfig: Path, work: Path) -> Program:
    assets = install_dir(by_name("kwok")) / "assets"
    stages = sorted(p for folder in ("node-stages", "node-heartbeat", "pod-stages") for p in (assets / folder).glob("*.yaml")
                    if p.name != "kustomization.yaml")
    config = work / "kwok.yaml"
    config.write_text("---\n".join(p.read_text() for p in stages))
    return Program("kwok", [str(binary("kwok")), "--kubeconfig", str(kubeconfig), "--config", str(config),
                            "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                            "--cidr=10.240.0.1/16", "--node-ip=10.250.0.1"],
                   work / "logs" / "kwok.log").start()


def dumps(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def send(plane: ControlPlane, requests: list[tuple[str, str, dict[str, Any], str]], threads: int = 8) -> float:
    """(method, path, body, content type) requests, `threads` at a time, each thread on one kept connection; the
    seconds they took. A refusal raises with the server's answer."""
    context, server = plane.admin_context()
    host, port = server.removeprefix("https://").rsplit(":", 1)
    local = threading.local()

    def one(request: tuple[str, str, dict[str, Any], str]) -> None:
        method, path, body, content_type = request
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=60)
        connection.request(method, path, json.dumps(body), {"Content-Type": content_type})
        response = connection.getresponse()
        answer = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {answer[:300]!r}")

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(one, requests):
            pass
    return time.monotonic() - started


def register(plane: ControlPlane, nodes: list[dict[str, Any]], threads: int = 8) -> float:
    """POSTs the Nodes as kubelets do at registration."""
    return send(plane, [("POST", "/api/v1/nodes", n, "application/json") for n in nodes], threads)


def set_taints(plane: ControlPlane, nodes: list[dict[str, Any]], drop: str, threads: int = 8) -> float:
    """Removes the taint `drop` from every node (as the health agent does once a node passes its checks)."""
    return send(plane, [("PATCH", f"/api/v1/nodes/{n['metadata']['name']}",
                         {"spec": {"taints": [t for t in n["spec"]["taints"] if t["key"] != drop]}},
                         "application/merge-patch+json") for n in nodes], threads)
