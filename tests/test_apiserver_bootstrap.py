"""API-server bootstrap: kubeadm with external etcd, Events to their own etcd, the scale flags, audit."""

from __future__ import annotations

from gpucluster.bootstrap.apiserver import BOOT_SCRIPT
from gpucluster.planning.control_plane import scale_flags
from tests.support.apiserver_documents import kubeadm_documents, render_apiserver_document


def test_external_etcd_and_events_override() -> None:
    init, cluster, _ = kubeadm_documents(render_apiserver_document(("https://10.0.0.73:2379", "https://10.0.0.74:2379")))
    assert "bootstrapTokens" not in init
    assert cluster["etcd"]["external"]["endpoints"] == ["https://10.0.0.68:2379", "https://10.0.0.69:2379"]  # type: ignore[index]
    args = {a["name"]: a["value"] for a in cluster["apiServer"]["extraArgs"]}  # type: ignore[index]
    assert args["etcd-servers-overrides"] == "/events#https://10.0.0.73:2379;https://10.0.0.74:2379"
    assert args["max-requests-inflight"] == "1500" and args["max-mutating-requests-inflight"] == "750"
    assert args["goaway-chance"] == "0.001" and args["audit-policy-file"].endswith("audit-policy.yaml")
    assert cluster["controlPlaneEndpoint"] == "10.0.0.4:6443"


def test_without_events_etcd_there_is_no_override_and_keys_are_private() -> None:
    document = render_apiserver_document(())
    _, cluster, _ = kubeadm_documents(document)
    names = {a["name"] for a in cluster["apiServer"]["extraArgs"]}  # type: ignore[index]
    assert "etcd-servers-overrides" not in names
    files = {f["path"]: f for f in document["write_files"]}  # type: ignore[index, union-attr]
    assert files["/etc/kubernetes/pki/apiserver.key"]["permissions"] == "0600"


def test_inflight_limits_scale_with_nodes() -> None:
    assert scale_flags(100).max_requests_inflight == 400
    assert scale_flags(7_500).max_requests_inflight == 1_500
    assert scale_flags(50_000).max_requests_inflight == 3_000


def test_kubeadm_init_writes_no_bootstrap_token() -> None:
    """kubeadm's bootstrap-token phase writes each listed token with `expiration = now + ttl`
    (`UpdateOrCreateTokens` -> `BootstrapTokenToSecret`, kubernetes `cmd/kubeadm/app/phases/bootstraptoken/node/token.go`),
    and an empty `bootstrapTokens` is defaulted to one random 24 h token (`SetDefaults_BootstrapTokens`,
    `cmd/kubeadm/app/apis/kubeadm/v1beta4/defaults.go`): the API servers skip the phase, and with it
    show-join-command, which would print that unregistered default token. The stack declares the tokens."""
    document = render_apiserver_document(())
    files = {f["path"]: f for f in document["write_files"]}  # type: ignore[index, union-attr]
    init_line = next(line for line in files[BOOT_SCRIPT]["content"].splitlines() if "kubeadm init" in line)
    skipped = init_line.split("--skip-phases=", 1)[1].split()[0].split(",")
    assert {"bootstrap-token", "show-join-command"} <= set(skipped)
