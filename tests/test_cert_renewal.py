"""Certificates renewed on the running machines (components/bootstrap/cert_renewal.py): the boot documents
install the timer and the CA keys it needs; the API servers' script, run with real OpenSSL, re-issues the etcd
client certificate, calls kubeadm only when one of kubeadm's certificates is due, and restarts the static pods.
The etcd members' script runs against a real etcd in e2e/tests/test_real_etcd.py."""

from __future__ import annotations

import base64
import datetime
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpucluster.bootstrap.cert_renewal import (
    KUBEADM_CERTS,
    KUBECONFIGS,
    RENEW_SCRIPT,
    STATIC_PODS,
    TIMER,
    apiserver_renew_script,
    etcd_renew_script,
)
from gpucluster.bootstrap.etcd import BOOT_SCRIPT as ETCD_BOOT_SCRIPT
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.pki import CLIENT, SERVER, CertPlan
from tests.support.real_pki import Issued, make_ca
from tests.support.stacks import stack_spec

NOW = datetime.datetime.now(datetime.UTC)


def _document(text: str) -> tuple[dict[str, dict[str, str]], list[list[str]]]:
    document = yaml.safe_load(text)
    return {f["path"]: f for f in document["write_files"]}, document["runcmd"]


def test_every_control_plane_machine_boots_with_its_renewal_timer() -> None:
    plan = plan_cluster(stack_spec("prod"))
    documents = boot_documents(plan)
    files, _ = _document(documents["apiserver.yaml"])
    assert files[RENEW_SCRIPT]["content"] == apiserver_renew_script() and files[RENEW_SCRIPT]["permissions"] == "0755"
    assert files["/etc/kubernetes/pki/etcd/ca.key"]["permissions"] == "0600"
    boot = files["/usr/local/sbin/gpucluster-apiserver-boot"]["content"].splitlines()
    assert boot.index(f"systemctl enable --now {TIMER}") > next(i for i, x in enumerate(boot) if "kubeadm init" in x)
    timer = files[f"/etc/systemd/system/{TIMER}"]["content"]
    assert "OnCalendar=daily" in timer and "RandomizedDelaySec=12h" in timer and "Persistent=true" in timer
    members = [name for name in documents if name.startswith("etcd-")]
    cp = plan.control_plane
    assert len(members) == len(cp.etcd.members) + len(cp.events.members if cp.events else ())
    for name in members:
        files, _ = _document(documents[name])
        assert files[RENEW_SCRIPT]["content"] == etcd_renew_script(), name
        assert files["/etc/etcd/pki/ca.key"]["permissions"] == "0600", name
        assert TIMER in files[ETCD_BOOT_SCRIPT]["content"], name


def test_the_scripts_pass_shellcheck(tmp_path: Path) -> None:
    binary = Path(sys.executable).parent / "shellcheck"
    for name, text in (("etcd.sh", etcd_renew_script()), ("apiserver.sh", apiserver_renew_script())):
        (tmp_path / name).write_text(text)
        result = subprocess.run([str(binary), "--severity=info", str(tmp_path / name)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout


def _leaf(name: str, usages: tuple[str, ...], ca: Issued, days: float, dns: tuple[str, ...] = ()) -> Issued:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    plan = CertPlan(name, "etcd-ca", name, None, dns, (), usages)
    builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(ca.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW - datetime.timedelta(days=300)).not_valid_after(NOW + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]
                                                    if "client_auth" in plan.usages
                                                    else [ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    return Issued(name, builder.sign(ca.key, hashes.SHA256()), key)


def _control_plane(root: Path, etcd_client_days: float, apiserver_days: float) -> Issued:
    """An API server's /etc/kubernetes as kubeadm and the boot document leave it, with chosen expiries."""
    pki = root / "pki"
    etcd_ca, cluster_ca = make_ca("ca", "etcd-ca", 2048), make_ca("ca", "kubernetes", 2048)
    etcd_ca.write(pki / "etcd")
    client = _leaf("apiserver-etcd-client", CLIENT, etcd_ca, etcd_client_days)
    client.write(pki)
    for name in KUBEADM_CERTS:
        _leaf(name, SERVER, cluster_ca, apiserver_days if name == "apiserver" else 200).write(pki)
    for conf in KUBECONFIGS:
        data = base64.b64encode(_leaf(conf, CLIENT, cluster_ca, 200).cert.public_bytes(serialization.Encoding.PEM))
        (root / conf).write_text(f"users:\n- name: x\n  user:\n    client-certificate-data: {data.decode()}\n")
    (root / "manifests").mkdir()
    for pod in STATIC_PODS:
        (root / "manifests" / f"{pod}.yaml").write_text(f"name: {pod}\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubeadm").write_text(f'#!/bin/bash\necho "kubeadm $*" >> {root}/calls.log\n')
    # crictl ps --name ^<pod>$ [-q] [--state running]: a container while the manifest is in place.
    (bin_dir / "crictl").write_text(
        "#!/bin/bash\npod=${3#^}\npod=${pod%$}\n"
        f'echo "crictl $pod $( [ -f {root}/manifests/$pod.yaml ] && echo up || echo down)" >> {root}/calls.log\n'
        f'[ -f {root}/manifests/$pod.yaml ] && echo 0123abcd\nexit 0\n')
    for tool in ("kubeadm", "crictl"):
        (bin_dir / tool).chmod(0o755)
    return client


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    script = root / "renew.sh"
    script.write_text(apiserver_renew_script())
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{root}/bin:/usr/bin:/bin", "K8S": str(root)})


def test_the_api_server_renews_its_etcd_client_certificate_and_restarts_its_pods(tmp_path: Path) -> None:
    """kubeadm does not renew `apiserver-etcd-client` with external etcd (`GetCertsWithoutEtcd`): the script
    re-issues it from the etcd CA, leaves kubeadm alone while its certificates are far from expiry, and restarts
    the static pods one at a time (kubeadm docs: restart the control plane after a renewal)."""
    old = _control_plane(tmp_path, etcd_client_days=5, apiserver_days=200)
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    renewed = x509.load_pem_x509_certificate((tmp_path / "pki" / "apiserver-etcd-client.crt").read_bytes())
    assert renewed.serial_number != old.cert.serial_number and renewed.public_key() == old.cert.public_key()
    assert renewed.not_valid_after_utc - NOW > datetime.timedelta(days=364)
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "pki" / "etcd" / "ca.crt"),
                             str(tmp_path / "pki" / "apiserver-etcd-client.crt")], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert not any(c.startswith("kubeadm") for c in calls)
    # Each pod is stopped (manifest out, container gone) and started again before the next one.
    order = [c.split()[1] for c in calls if c.startswith("crictl")]
    assert [p for i, p in enumerate(order) if i == 0 or order[i - 1] != p] == list(STATIC_PODS)
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == sorted(f"{p}.yaml" for p in STATIC_PODS)


@pytest.mark.parametrize("due", [True, False])
def test_kubeadm_renews_its_certificates_only_when_one_is_due(tmp_path: Path, due: bool) -> None:
    _control_plane(tmp_path, etcd_client_days=200, apiserver_days=10 if due else 200)
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines() if (tmp_path / "calls.log").exists() else []
    kubeadm = [c for c in calls if c.startswith("kubeadm")]
    assert kubeadm == ([f"kubeadm certs renew all --config {tmp_path}/kubeadm.yaml"] if due else [])
    assert any(c.startswith("crictl") for c in calls) == due


def test_a_renewal_that_does_not_chain_to_the_ca_is_not_installed(tmp_path: Path) -> None:
    """A wrong CA key (here: another CA's) stops the script before the old certificate is replaced: OpenSSL
    refuses a CA key that does not match the CA certificate, and the chain check would catch any other."""
    old = _control_plane(tmp_path, etcd_client_days=5, apiserver_days=200)
    other = make_ca("ca", "not-etcd-ca", 2048)
    (tmp_path / "pki" / "etcd" / "ca.key").write_text(other.key_pem())
    result = _run(tmp_path)
    assert result.returncode != 0 and "apiserver-etcd-client.crt" in result.stderr
    assert "did not sign the renewal" in result.stderr or "does not chain" in result.stderr
    assert (tmp_path / "pki" / "apiserver-etcd-client.crt").read_text() == old.cert_pem()
