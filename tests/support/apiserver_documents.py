"""An API server's boot document rendered for prod's sizes, and the kubeadm configuration documents it writes."""

from __future__ import annotations

import yaml

from gpucluster.bootstrap.apiserver import ApiServerBootstrap, render_apiserver_cloud_init
from gpucluster.planning.control_plane import scale_flags


def render_apiserver_document(events: tuple[str, ...]) -> dict[str, object]:
    b = ApiServerBootstrap(
        cluster="prod", kubernetes_version="1.36.4", endpoint="10.0.0.4:6443", service_cidr="192.168.0.0/16",
        etcd_endpoints=("https://10.0.0.68:2379", "https://10.0.0.69:2379"), events_etcd_endpoints=events,
        flags=scale_flags(7_500),
        pki_files={"ca.crt": "C", "ca.key": "K", "apiserver.key": "AK"})
    return yaml.safe_load(render_apiserver_cloud_init(b))


def kubeadm_documents(document: dict[str, object]) -> list[dict[str, object]]:
    files = {f["path"]: f for f in document["write_files"]}  # type: ignore[index, union-attr]
    return list(yaml.safe_load_all(files["/etc/kubernetes/kubeadm.yaml"]["content"]))
