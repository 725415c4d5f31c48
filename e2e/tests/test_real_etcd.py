"""A real three-member etcd (etcd, etcdctl and etcdutl at the pinned 3.6 patch, built by make e2e: e2e/consumers.py),
started by the rendered run script with the rendered flags and certificates issued from the plan, on
loopback only. The rendered snapshot script runs against it and uploads to a stand-in of the Blob service and
IMDS on loopback; etcd's own gRPC gateway answers; a member loses its data and rejoins.

Only the machine-specific paths and addresses change: the data, PKI and state folders move under a
temporary folder, members listen on 127.0.0.1 at free ports instead of their VNet addresses.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import gzip
import http.server
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from e2e.consumers import binary
from e2e.processes import free_ports
from gpucluster.bootstrap.cert_renewal import RENEW_SCRIPT, etcd_renew_script
from gpucluster.bootstrap.etcd import (
    BIN_DIR,
    DATA_DIR,
    DEFRAG_SCRIPT,
    PKI_DIR,
    RUN_SCRIPT,
    SNAPSHOT_SCRIPT,
    STATE_DIR,
    EtcdBootstrap,
    EtcdMember,
    render_etcd_cloud_init,
)
from gpucluster.bootstrap.from_plan import EtcdSecrets, etcd_bootstrap
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.pki import ETCD_CA, SERVER, etcd_member_certificates, plan_certificates
from tests.support.real_pki import Issued, issue, make_ca
from tests.support.stacks import stack_spec

ETCD_BIN = binary("etcd").parent
LOOPBACK = "127.0.0.1"


def _run(args: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a script in its own process group and end the whole group if it overruns (etcdctl included)."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
    return subprocess.CompletedProcess(args, process.returncode, out, err)


@dataclass
class Member:
    name: str
    root: Path
    bootstrap: EtcdBootstrap
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.root / "etcd.log"

    def localise(self, script: str) -> str:
        """The rendered script with this test's folders for the machine's."""
        return (script.replace(PKI_DIR, str(self.root / "pki")).replace(DATA_DIR, str(self.root / "data"))
                .replace(STATE_DIR, str(self.root / "state")).replace(BIN_DIR, str(ETCD_BIN))
                .replace("snap=/tmp/", f"snap={self.root}/"))

    def rendered(self, path: str) -> str:
        document = yaml.safe_load(render_etcd_cloud_init(self.bootstrap))
        return next(f["content"] for f in document["write_files"] if f["path"] == path)

    def start(self) -> None:
        script = self.root / "run.sh"
        script.write_text(self.localise(self.rendered(RUN_SCRIPT)))
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(["bash", str(script)], stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None

    def etcdctl(self, *args: str, cert: str = "client", timeout: float = 30) -> subprocess.CompletedProcess[str]:
        pki = self.root / "pki"
        return subprocess.run(
            [str(ETCD_BIN / "etcdctl"), f"--endpoints={self.bootstrap.member.client_url}", f"--cacert={pki}/ca.crt",
             f"--cert={pki}/{cert}.crt", f"--key={pki}/{cert}.key", *args],
            capture_output=True, text=True, timeout=timeout, env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"})

    def wait_healthy(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.etcdctl("endpoint", "health", timeout=15).returncode == 0:
                return
            if self.process is not None and self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"{self.name} not healthy:\n{self.log.read_text()[-3000:]}")


def _write(issued: Issued, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.crt").write_text(issued.cert_pem())
    (folder / f"{name}.key").write_text(issued.key_pem())
    (folder / f"{name}.key").chmod(0o600)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Member]]:
    plan = plan_cluster(stack_spec("dev"))
    etcd = plan.control_plane.etcd
    # prod's quota, not etcd's 2 GiB default: the metric below then shows the rendered flag took effect.
    quota = plan_cluster(stack_spec("prod")).control_plane.etcd.quota_backend_bytes
    root = tmp_path_factory.mktemp("etcd")
    ca = make_ca(ETCD_CA, "etcd-ca")
    _write(ca, root / "ca", "ca")
    certs = {c.name: c for c in plan_certificates(plan.spec.name, plan.ip, plan.control_plane)}
    ports = free_ports(3 * len(etcd.members))
    local = tuple(EtcdMember(m.name, LOOPBACK, ports[3 * i], ports[3 * i + 1]) for i, m in enumerate(etcd.members))
    members = []
    for i, planned in enumerate(etcd.members):
        folder = root / planned.name
        secrets = EtcdSecrets(*(["unused"] * 7), snapshot_url="https://account.blob.core.windows.net/etcd-snapshots")
        b = etcd_bootstrap(plan, etcd, planned, secrets)
        b = replace(b, member=local[i], cluster=local, metrics_port=ports[3 * i + 2], quota_backend_bytes=quota)
        (folder / "pki").mkdir(parents=True)
        (folder / "pki" / "ca.crt").write_text(ca.cert_pem())
        for role, cert_name in etcd_member_certificates(planned.name).items():
            plan_cert = certs[cert_name]
            if plan_cert.ip_addresses:  # the member's VNet address becomes loopback here
                plan_cert = replace(plan_cert, ip_addresses=(LOOPBACK,))
            _write(issue(plan_cert, ca), folder / "pki", role)
        members.append(Member(planned.name, folder, b))
    try:
        for member in members:
            member.start()
        for member in members:
            member.wait_healthy()
        yield members
    finally:
        for member in members:
            member.stop()


def test_members_bootstrap_with_the_rendered_flags(cluster: list[Member]) -> None:
    listed = cluster[0].etcdctl("member", "list")
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split(", ")[2] for line in listed.stdout.splitlines()) == [m.name for m in cluster]
    assert all(", started, " in line for line in listed.stdout.splitlines())
    for member in cluster:
        assert "--initial-cluster-state=new" not in member.rendered(RUN_SCRIPT)  # decided at start
        # No peer had a quorum when each started: the first bootstrap, decided by the run script.
        assert '"initial-cluster-state":"new"' in member.log.read_text()


def _metrics(member: Member) -> dict[str, float]:
    """etcd's own /metrics on the rendered `--listen-metrics-urls` (Prometheus text format)."""
    url = f"http://{LOOPBACK}:{member.bootstrap.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def test_metrics_export_the_quota_db_size_and_fsync_latency(cluster: list[Member]) -> None:
    """What docs/control-plane.md tells a scraper to alert on: the DB size against the quota, and WAL fsync
    latency (etcd v3.6 op-guide/maintenance.md "Space quota"; etcd's metrics.md, disk section)."""
    member = cluster[0]
    metrics = _metrics(member)
    assert f"--quota-backend-bytes={member.bootstrap.quota_backend_bytes}" in member.rendered(RUN_SCRIPT)
    assert member.bootstrap.quota_backend_bytes != 2 * 2**30
    assert metrics["etcd_server_quota_backend_bytes"] == member.bootstrap.quota_backend_bytes
    assert metrics["etcd_mvcc_db_total_size_in_bytes"] > 0
    assert any(name.startswith("etcd_disk_wal_fsync_duration_seconds_bucket") for name in metrics)


def _leader(cluster: list[Member]) -> Member:
    rows = json.loads(cluster[0].etcdctl("endpoint", "status", "--cluster", "--write-out=json").stdout)
    url = next(r["Endpoint"] for r in rows if r["Status"]["header"]["member_id"] == r["Status"]["leader"])
    return next(m for m in cluster if m.bootstrap.member.client_url == url)


def _defrag_times(member: Member, since: int) -> list[str]:
    """Timestamps of the defragmentations etcd logged after byte `since` of its log."""
    found = []
    for line in member.log.read_text()[since:].splitlines():
        if line.startswith("{") and "finished defragmenting directory" in line:
            found.append(json.loads(line)["ts"])
    return found


def test_the_rendered_defragmentation_runs_followers_first_and_the_leader_last(cluster: list[Member]) -> None:
    """Defragmentation blocks the member and is issued per endpoint (etcd v3.6 op-guide/maintenance.md): the
    leader's timer defragments each follower, hands leadership on, then defragments itself."""
    for i in range(200):  # history to compact and free pages to reclaim
        assert cluster[0].etcdctl("put", f"/registry/defrag/{i % 20}", "x" * 2000).returncode == 0
    leader = _leader(cluster)
    followers = [m for m in cluster if m is not leader]
    marks = {m.name: len(m.log.read_text()) for m in cluster}

    def run(member: Member) -> subprocess.CompletedProcess[str]:
        script = member.root / "defrag.sh"
        script.write_text(member.localise(member.rendered(DEFRAG_SCRIPT)))
        return _run(["bash", str(script)], timeout=180, env={"PATH": "/usr/bin:/bin"})

    idle = run(followers[0])
    assert idle.returncode == 0, idle.stderr
    assert "its timer defragments the cluster" in idle.stdout
    assert all(not _defrag_times(m, marks[m.name]) for m in cluster)

    done = run(leader)
    assert done.returncode == 0, done.stderr
    order = [re.findall(r"https://[0-9.:]+", line)[0] for line in done.stdout.splitlines()
             if line.startswith("gpucluster: defragmenting")]
    assert sorted(order[:-1]) == sorted(m.bootstrap.member.client_url for m in followers)
    assert order[-1] == leader.bootstrap.member.client_url
    times = {m.name: _defrag_times(m, marks[m.name]) for m in cluster}
    assert all(len(t) == 1 for t in times.values()), times
    assert all(times[leader.name][0] > times[f.name][0] for f in followers)
    assert _leader(cluster) is not leader  # it was a follower when it was defragmented
    for member in cluster:
        member.wait_healthy()


class BlobService(http.server.ThreadingHTTPServer):
    """IMDS's token endpoint and the Blob service's Put Block / Put Block List, on loopback, keeping what arrives."""

    def __init__(self) -> None:
        self.blocks: dict[str, bytes] = {}
        self.blobs: dict[str, bytes] = {}
        self.requests: list[dict[str, str]] = []
        self.fail_blocks = False
        self.seen_block = threading.Event()
        super().__init__((LOOPBACK, 0), _BlobHandler)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.server_address[1]}"


class _BlobHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def service(self) -> BlobService:
        assert isinstance(self.server, BlobService)
        return self.server

    def _reply(self, code: int, body: bytes = b"") -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/metadata/identity/oauth2/token") and self.headers.get("Metadata") == "true":
            self._reply(200, json.dumps({"access_token": "token-from-imds", "token_type": "Bearer"},
                                           separators=(",", ":")).encode())
        else:
            self._reply(404)

    def do_PUT(self) -> None:
        self.service.requests.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        if "chunked" in (self.headers.get("Transfer-Encoding") or "") or self.headers.get("Content-Length") is None:
            self._reply(411)  # the Blob service wants a Content-Length on Put Block
            return
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Authorization") != "Bearer token-from-imds" or not self.headers.get("x-ms-version"):
            self._reply(403)
            return
        blob, _, query = self.path.partition("?")
        params = dict(part.split("=", 1) for part in query.split("&"))
        if params.get("comp") == "block":
            self.service.seen_block.set()
            if self.service.fail_blocks:
                self._reply(500)
                return
            self.service.blocks[f"{blob}/{params['blockid']}"] = body
            self._reply(201)
        elif params.get("comp") == "blocklist":
            ids = [e.text for e in ElementTree.fromstring(body) if e.tag == "Latest"]
            self.service.blobs[blob] = b"".join(self.service.blocks[f"{blob}/{i}"] for i in ids)
            self._reply(201)
        else:
            self._reply(400)


@pytest.fixture
def blob_service() -> Iterator[BlobService]:
    server = BlobService()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _snapshot_script(member: Member, service: BlobService, block: str = "256") -> Path:
    """The rendered snapshot script with this test's folders, the stand-in's addresses, and small blocks so a small
    snapshot still goes up in several."""
    text = member.localise(member.rendered(SNAPSHOT_SCRIPT))
    text = text.replace("http://169.254.169.254", service.url).replace(member.bootstrap.snapshot_url,
                                                                       f"{service.url}/etcd-snapshots")
    text = text.replace("split -b 100M", f"split -b {block}")
    script = member.root / "snapshot.sh"
    script.write_text(text)
    return script


def test_the_rendered_snapshot_is_streamed_in_blocks_and_its_files_removed(cluster: list[Member],
                                                                           blob_service: BlobService) -> None:
    """etcd `--client-cert-auth=true`: the snapshot's certificate must carry clientAuth (Go crypto/tls). The upload
    is Put Block per block file with curl `--upload-file` (a Content-Length, the body read from the file, never
    `--data-binary @file`, which reads the whole snapshot into memory), then Put Block List (Blob service REST API);
    the blocks reassemble into a snapshot etcdutl accepts, and nothing is left on the member's disk."""
    member = cluster[0]
    assert member.etcdctl("put", "/registry/gpucluster-test", "before-snapshot").returncode == 0
    assert "--data-binary @" not in member.rendered(SNAPSHOT_SCRIPT)
    result = _run(["bash", str(_snapshot_script(member, blob_service))], timeout=180)
    assert result.returncode == 0, result.stderr
    (name, blob), = blob_service.blobs.items()
    assert re.fullmatch(rf"/etcd-snapshots/{member.name}-\d{{8}}T\d{{6}}Z\.db\.gz", name)
    puts = [r for r in blob_service.requests if "comp=block&" in r["path"]]
    assert len(puts) > 1 and all(r.get("content-length") for r in puts)
    ids = [base64.b64decode(r["path"].rsplit("blockid=", 1)[1]).decode() for r in puts]
    assert ids == [f"block-{i:06d}" for i in range(len(puts))]
    restored = member.root / "restored.db"
    restored.write_bytes(gzip.decompress(blob))
    status = subprocess.run([str(ETCD_BIN / "etcdutl"), "snapshot", "status", str(restored), "--write-out=json"],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and '"totalKey"' in status.stdout, status.stderr
    assert not (member.root / "state" / "snapshot").exists()


def test_a_failed_upload_leaves_no_snapshot_behind(cluster: list[Member], blob_service: BlobService) -> None:
    """The Blob service refuses the blocks; while the script waits to retry, the unit is stopped (systemd sends
    SIGTERM): the EXIT trap removes the snapshot and its blocks on that path too."""
    member = cluster[0]
    blob_service.fail_blocks = True
    script = _snapshot_script(member, blob_service)
    process = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert blob_service.seen_block.wait(120), "the script never reached the Blob service"
        work = member.root / "state" / "snapshot"
        assert any(work.glob("block.*"))  # the snapshot is on disk while the upload waits
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    assert process.returncode != 0
    assert not work.exists()
    assert not blob_service.blobs


def test_etcds_grpc_gateway_answers_with_the_planned_serving_certificate(cluster: list[Member]) -> None:
    """etcd's gRPC gateway (the JSON API under /v3/) dials the member's own client URL presenting `--cert-file`
    (etcd `server/embed/serve.go`, the gateway's dial clones the server TLS config): with `--client-cert-auth` the
    serving certificate must carry clientAuth, as kubeadm's does (`KubeadmCertEtcdServer`, kubernetes
    cmd/kubeadm/app/phases/certs/certlist.go)."""
    member = cluster[0]
    assert member.etcdctl("put", "/registry/gpucluster-gateway", "through-the-gateway").returncode == 0
    answer = _gateway_range(member, "/registry/gpucluster-gateway")
    assert base64.b64decode(answer["kvs"][0]["value"]).decode() == "through-the-gateway"


def _gateway_range(member: Member, key: str) -> dict[str, Any]:
    pki = member.root / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "client.crt", pki / "client.key")
    request = urllib.request.Request(f"{member.bootstrap.member.client_url}/v3/kv/range", method="POST",
                                     data=json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode())
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.loads(response.read())


def test_a_serving_certificate_without_client_auth_breaks_the_gateway(tmp_path: Path) -> None:
    """What the plan issued before: an etcd serving certificate with serverAuth only. The member serves gRPC, but
    its gateway's own connection is refused (`incompatible key usage` in the member's log) and /v3/ answers no data."""
    plan = plan_cluster(stack_spec("dev"))
    etcd = plan.control_plane.etcd
    planned = etcd.members[0]
    certs = {c.name: c for c in plan_certificates(plan.spec.name, plan.ip, plan.control_plane)}
    ca = make_ca(ETCD_CA, "etcd-ca")
    client_port, peer_port, metrics_port = free_ports(3)
    this = EtcdMember(planned.name, LOOPBACK, client_port, peer_port)
    b = replace(etcd_bootstrap(plan, etcd, planned, EtcdSecrets(*(["unused"] * 7), snapshot_url="https://a.invalid/c")),
                member=this, cluster=(this,), metrics_port=metrics_port)
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_text(ca.cert_pem())
    for role, cert_name in etcd_member_certificates(planned.name).items():
        plan_cert = certs[cert_name]
        if plan_cert.ip_addresses:
            plan_cert = replace(plan_cert, ip_addresses=(LOOPBACK,))
        if role == "server":
            plan_cert = replace(plan_cert, usages=SERVER)
        _write(issue(plan_cert, ca), tmp_path / "pki", role)
    member = Member(planned.name, tmp_path, b)
    member.start()
    try:
        member.wait_healthy()
        assert member.etcdctl("put", "/registry/gpucluster-gateway", "x").returncode == 0  # gRPC itself works
        with pytest.raises(urllib.error.HTTPError):
            _gateway_range(member, "/registry/gpucluster-gateway")
        deadline = time.monotonic() + 10
        while "incompatible key usage" not in member.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "incompatible key usage" in member.log.read_text()
    finally:
        member.stop()


def test_a_member_that_lost_its_data_rejoins(cluster: list[Member]) -> None:
    """Local NVMe is wiped on deallocation or host redeploy: the member finds its data dir empty, removes and
    re-adds itself through a healthy peer, and starts as `existing` (etcd runtime reconfiguration)."""
    first, lost = cluster[0], cluster[1]
    assert first.etcdctl("put", "/registry/gpucluster-rejoin", "kept").returncode == 0
    before = {line.split(", ")[0] for line in first.etcdctl("member", "list").stdout.splitlines()}
    lost.stop()
    shutil.rmtree(lost.root / "data")
    lost.start()
    lost.wait_healthy(90)
    assert "is empty and the cluster answers" in lost.log.read_text()
    listed = first.etcdctl("member", "list").stdout.splitlines()
    assert len(listed) == 3 and all(", started, " in line for line in listed)
    assert {line.split(", ")[0] for line in listed} != before  # a new member id replaced the old one
    deadline = time.monotonic() + 30
    got = lost.etcdctl("get", "/registry/gpucluster-rejoin", "--print-value-only", "--consistency=s")
    while got.stdout.strip() != "kept" and time.monotonic() < deadline:
        time.sleep(0.5)
        got = lost.etcdctl("get", "/registry/gpucluster-rejoin", "--print-value-only", "--consistency=s")
    assert got.stdout.strip() == "kept"


def test_renewed_certificates_reach_a_running_member(cluster: list[Member], tmp_path: Path) -> None:
    """tools/etcd_certs.py: from a `pulumi stack export --show-secrets` (resources named as ClusterPki names
    them, keys in secret envelopes) to a script that installs the member's renewed certificates; etcd serves
    the new ones after its restart."""
    from tools.etcd_certs import SECRET_SIG, main

    member = cluster[2]
    plan = plan_cluster(stack_spec("dev"))
    certs = {c.name: c for c in plan_certificates(plan.spec.name, plan.ip, plan.control_plane)}
    ca_pem = (member.root / "pki" / "ca.crt").read_text()
    ca = _load_ca(member.root.parent / "ca")
    resources = [{"urn": f"urn:pulumi:dev::gpucluster::tls:index/selfSignedCert:SelfSignedCert::dev-pki-{ETCD_CA}",
                  "type": "tls:index/selfSignedCert:SelfSignedCert", "outputs": {"certPem": ca_pem}},
                 {"urn": f"urn:pulumi:dev::gpucluster::tls:index/privateKey:PrivateKey::dev-pki-{ETCD_CA}-key",
                  "type": "tls:index/privateKey:PrivateKey",
                  "outputs": {"privateKeyPem": {"4dabf18193072939515e22adb298388d": SECRET_SIG,
                                                "plaintext": json.dumps(ca.key_pem())}}}]
    renewed = {}
    for cert_name in etcd_member_certificates(member.name).values():
        plan_cert = certs[cert_name]
        if plan_cert.ip_addresses:
            plan_cert = replace(plan_cert, ip_addresses=(LOOPBACK,))
        renewed[cert_name] = issue(plan_cert, ca)
        urn = f"urn:pulumi:dev::gpucluster::tls:index/locallySignedCert:LocallySignedCert::dev-pki-{cert_name}"
        resources.append({"urn": urn,
                          "type": "tls:index/locallySignedCert:LocallySignedCert",
                          "outputs": {"certPem": renewed[cert_name].cert_pem()}})
        resources.append({"urn": f"urn:pulumi:dev::gpucluster::tls:index/privateKey:PrivateKey::dev-pki-{cert_name}-key",
                          "type": "tls:index/privateKey:PrivateKey",
                          "outputs": {"privateKeyPem": {"4dabf18193072939515e22adb298388d": SECRET_SIG,
                                                        "plaintext": json.dumps(renewed[cert_name].key_pem())}}})
    export = tmp_path / "export.json"
    export.write_text(json.dumps({"version": 3, "deployment": {"resources": resources}}))
    script = tmp_path / "rotate.sh"
    with script.open("w") as out, contextlib.redirect_stdout(out):
        assert main([str(export), member.name]) == 0
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    assert shellcheck
    checked = subprocess.run([shellcheck, "--shell=bash", "--severity=info", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    fake = tmp_path / "bin" / "systemctl"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/systemctl.log\n')
    fake.chmod(0o755)
    (tmp_path / "systemd").mkdir()
    localised = (member.localise(script.read_text()).replace("https://127.0.0.1:2379", member.bootstrap.member.client_url)
                 .replace("/etc/systemd/system/", f"{tmp_path}/systemd/")
                 .replace(RENEW_SCRIPT, f"{tmp_path}/gpucluster-cert-renew"))
    result = _run(["bash", "-c", localised], timeout=180, env={"PATH": f"{fake.parent}:/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "systemctl.log").read_text().split() == [
        "daemon-reload", "enable", "--now", "gpucluster-cert-renew.timer", "restart", "etcd"]
    assert (member.root / "pki" / "ca.key").read_text() == ca.key_pem()  # the member renews by itself from now on
    assert (tmp_path / "gpucluster-cert-renew").read_text() == member.localise(etcd_renew_script())
    server = renewed[etcd_member_certificates(member.name)["server"]]
    assert (member.root / "pki" / "server.crt").read_text() == server.cert_pem()
    assert oct((member.root / "pki" / "server.key").stat().st_mode & 0o777) == "0o600"
    member.stop()
    member.start()
    member.wait_healthy()
    context = ssl.create_default_context(cafile=str(member.root / "pki" / "ca.crt"))
    context.load_cert_chain(member.root / "pki" / "client.crt", member.root / "pki" / "client.key")
    with socket.create_connection((LOOPBACK, member.bootstrap.member.client_port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=LOOPBACK) as tls:
        served = tls.getpeercert(binary_form=True)
    assert served is not None and x509.load_der_x509_certificate(served).serial_number == server.cert.serial_number


def _leaf_for_key(member: Member, role: str, ca: Issued, days: float) -> x509.Certificate:
    """The member's planned certificate for its existing key, valid `days` from now (a renewal's input)."""
    from cryptography.hazmat.primitives import hashes, serialization

    current = x509.load_pem_x509_certificate((member.root / "pki" / f"{role}.crt").read_bytes())
    key = serialization.load_pem_private_key((member.root / "pki" / f"{role}.key").read_bytes(), None)
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(current.subject).issuer_name(ca.cert.subject)
               .public_key(current.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=300)).not_valid_after(now + datetime.timedelta(days=days)))
    for extension in current.extensions:
        builder = builder.add_extension(extension.value, extension.critical)
    cert = builder.sign(ca.key, hashes.SHA256())
    (member.root / "pki" / f"{role}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    assert key is not None
    return cert


def test_a_member_renews_its_own_certificates_and_etcd_serves_them_without_a_restart(cluster: list[Member]) -> None:
    """components/bootstrap/cert_renewal.py with real OpenSSL and a real etcd: a server certificate 5 days from
    expiry is re-issued from the etcd CA key the member carries, for the same key, subject, names and usages,
    valid 365 days; one 200 days from expiry is left alone. etcd reads its certificate files again for each new
    TLS handshake (etcd `client/pkg/transport/listener.go`, TLSInfo's GetCertificate), so the next connection
    gets the new certificate while the process keeps running."""
    member = cluster[0]
    ca = _load_ca(member.root.parent / "ca")
    (member.root / "pki" / "ca.key").write_text(ca.key_pem())
    (member.root / "pki" / "ca.key").chmod(0o600)
    expiring = _leaf_for_key(member, "server", ca, days=5)
    peer = _leaf_for_key(member, "peer", ca, days=200)
    member.wait_healthy()
    pid = member.process.pid if member.process else None
    script = member.root / "renew.sh"
    script.write_text(etcd_renew_script())
    result = _run(["bash", str(script)], timeout=60, env={"PATH": "/usr/bin:/bin", "PKI": str(member.root / "pki")})
    assert result.returncode == 0, result.stderr
    assert "renewed" in result.stdout and "server.crt" in result.stdout
    renewed = x509.load_pem_x509_certificate((member.root / "pki" / "server.crt").read_bytes())
    assert renewed.serial_number != expiring.serial_number
    assert renewed.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(days=364)
    assert renewed.subject == expiring.subject and renewed.public_key() == expiring.public_key()
    for kind in (x509.SubjectAlternativeName, x509.ExtendedKeyUsage, x509.KeyUsage):
        assert renewed.extensions.get_extension_for_class(kind).value == \
            expiring.extensions.get_extension_for_class(kind).value
    assert x509.load_pem_x509_certificate((member.root / "pki" / "peer.crt").read_bytes()) == peer
    assert member.process is not None and member.process.pid == pid and member.process.poll() is None
    context = ssl.create_default_context(cafile=str(member.root / "pki" / "ca.crt"))
    context.load_cert_chain(member.root / "pki" / "client.crt", member.root / "pki" / "client.key")
    with socket.create_connection((LOOPBACK, member.bootstrap.member.client_port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=LOOPBACK) as tls:
        served = tls.getpeercert(binary_form=True)
    assert served is not None and x509.load_der_x509_certificate(served).serial_number == renewed.serial_number
    member.wait_healthy()


def _load_ca(folder: Path) -> Issued:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key = load_pem_private_key((folder / "ca.key").read_bytes(), None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return Issued(ETCD_CA, x509.load_pem_x509_certificate((folder / "ca.crt").read_bytes()), key)


def test_a_member_refuses_to_start_an_empty_cluster_when_every_member_lost_its_data(cluster: list[Member]) -> None:
    for member in cluster:
        member.stop()
    victim = cluster[2]
    shutil.rmtree(victim.root / "data")
    victim.start()
    assert victim.process is not None
    assert victim.process.wait(120) == 1
    assert "restore from a snapshot" in victim.log.read_text()
    assert not (victim.root / "data").exists()
