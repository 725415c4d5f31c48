"""`out/<stack>/boot/`: every distinct document a machine boots with, as the components render it.

The scale sets and VMs carry these documents as customData, a Pulumi secret (it holds keys and the
bootstrap token), so preview.json shows only `[secret]`. Here they are rendered from the same plan
and the same builders (components/bootstrap/from_plan.py) with every secret, and every value that
exists only after deployment, replaced by a visible marker: a reviewer sees in a pull request what
the machines will run. Byte-identical for the same stack.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpucluster.bake.manifest import missing_files
from gpucluster.bootstrap.apiserver import render_apiserver_cloud_init
from gpucluster.bootstrap.etcd import render_etcd_cloud_init
from gpucluster.bootstrap.from_plan import (
    EtcdSecrets,
    PullIdentity,
    apiserver_bootstrap,
    apiserver_pki_paths,
    etcd_bootstrap,
    node_bootstrap,
)
from gpucluster.bootstrap.node import render_cloud_init
from gpucluster.errors import Problem
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_images import API_SCALE_SET
from gpucluster.planning.pki import etcd_member_certificates

BOOT_DIR = "boot"


def secret(what: str) -> str:
    """A value kept secret in state (a private key, the bootstrap token)."""
    return f"[secret: {what}]"


def at_deploy(what: str) -> str:
    """A value Azure or pulumi-tls produces when the stack is deployed (a certificate, a generated name)."""
    return f"[at deploy: {what}]"


Filler = Callable[[bool, str], str]
"""(secret, what) -> the text standing for a value known only at deploy: a marker in the plan's documents, a value
of the real size where customData is measured (components/offline/custom_data_size.py)."""


def marker(is_secret: bool, what: str) -> str:
    return secret(what) if is_secret else at_deploy(what)


def boot_documents(plan: ClusterPlan, fill: Filler = marker) -> dict[str, str]:
    """File name -> #cloud-config text, for the API servers, each etcd member and each scale set; `fill` gives each
    value known only at deploy (default: a marker saying what it is)."""

    def secret(what: str) -> str:
        return fill(True, what)

    def at_deploy(what: str) -> str:
        return fill(False, what)

    def _pki_marker(path: str) -> str:
        return fill(path.endswith(".key"), f"/etc/kubernetes/pki/{path}")

    tokens = plan.tokens
    token = secret(f"bootstrap token of rotation period {tokens.current.period}, expires {tokens.current.expiration}")
    identity = PullIdentity(at_deploy("client id of the registry pull identity"), at_deploy("tenant id"))
    documents = {"apiserver.yaml": render_apiserver_cloud_init(
        apiserver_bootstrap(plan, {p: _pki_marker(p) for p in apiserver_pki_paths()}, identity))}
    snapshot_url = at_deploy("https://<snapshot storage account>.blob.core.windows.net/etcd-snapshots")
    for etcd in (plan.control_plane.etcd, plan.control_plane.events):
        if etcd is None:
            continue
        for member in etcd.members:
            names = etcd_member_certificates(member.name)
            secrets = EtcdSecrets(
                ca_cert=at_deploy("etcd CA certificate"), server_cert=at_deploy(f"{names['server']} certificate"),
                server_key=secret(f"{names['server']} key"), peer_cert=at_deploy(f"{names['peer']} certificate"),
                peer_key=secret(f"{names['peer']} key"), client_cert=at_deploy(f"{names['client']} certificate"),
                client_key=secret(f"{names['client']} key"), snapshot_url=snapshot_url, ca_key=secret("etcd CA key"))
            documents[f"{member.name}.yaml"] = render_etcd_cloud_init(etcd_bootstrap(plan, etcd, member, secrets))
    ca_hash = at_deploy("sha256 of the cluster CA's public key")
    for pool in plan.pools:
        for scale_set in pool.scale_sets:
            documents[f"pool-{pool.name}-{scale_set.name}.yaml"] = render_cloud_init(
                node_bootstrap(plan, pool, scale_set, token, ca_hash, identity))
    return dict(sorted(documents.items()))


def document_images(plan: ClusterPlan) -> dict[str, str]:
    """File name (as `boot_documents` names it) -> the image definition the machine boots."""
    machines = plan.images.machines
    found = {"apiserver.yaml": machines[API_SCALE_SET].definition}
    for etcd in (plan.control_plane.etcd, plan.control_plane.events):
        for member in etcd.members if etcd is not None else ():
            found[f"{member.name}.yaml"] = machines[member.name].definition
    for pool in plan.pools:
        for scale_set in pool.scale_sets:
            found[f"pool-{pool.name}-{scale_set.name}.yaml"] = machines[scale_set.name].definition
    return found


def missing_image_files(plan: ClusterPlan, documents: dict[str, str]) -> list[Problem]:
    """Each file a boot document names that neither it writes nor its machine's image holds
    (components/bake/manifest.py)."""
    images = document_images(plan)
    return [Problem(f"boot/{name}", f"names {path}, which the {images[name]!r} image does not hold and the document "
                                    "does not write")
            for name, text in documents.items() for path in missing_files(text, images[name])]


def write_boot_documents(plan: ClusterPlan, out: Path, documents: dict[str, str] | None = None) -> int:
    """Write `out/boot/*.yaml` (`documents`: `boot_documents(plan)` when the caller has them); returns how many."""
    folder = out / BOOT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    documents = boot_documents(plan) if documents is None else documents
    for name, text in documents.items():
        (folder / name).write_text(text, encoding="utf-8")
    return len(documents)
