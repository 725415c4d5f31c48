"""A real control plane on loopback, started from a stack's rendered API-server boot document (out/<stack>/boot/
apiserver.yaml) as an API-server VM starts it: the document's kubeadm configuration goes to the real kubeadm, whose
certs, kubeconfig and control-plane phases issue the certificates and write the static pods; their commands run
here with the real kube-apiserver, kube-controller-manager and kube-scheduler, against a real etcd.

Only what is machine-specific changes: /etc/kubernetes and /var/log/kubernetes move under a work folder, the
endpoint and etcd are on 127.0.0.1 at free ports, and the kubelet-facing parts (the CRI socket, the providerID
patches) are dropped because no kubelet runs here.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.consumers import binary
from e2e.egress import Egress
from e2e.pki import etcd_pki
from e2e.processes import Program, free_ports

HOST_DIRS = ("/etc/kubernetes", "/var/log/kubernetes")
KUBEADM_CONFIG = "/etc/kubernetes/kubeadm.yaml"


def rendered_files(boot_document: Path) -> dict[str, str]:
    document = yaml.safe_load(boot_document.read_text())
    return {f["path"]: f.get("content", "") for f in document["write_files"]}


@dataclass
class Localiser:
    """Moves the document's host paths under `work`."""

    work: Path

    def path(self, value: str) -> str:
        for host in HOST_DIRS:
            if value == host or value.startswith(host + "/"):
                return str(self.work / host.lstrip("/")) + value[len(host):]
        return value

    def text(self, content: str) -> str:
        """A rendered file's text with its host paths moved (the scheduler's configuration names its kubeconfig)."""
        for host in HOST_DIRS:
            content = content.replace(host + "/", self.path(host) + "/")
        return content

    def arg(self, value: str) -> str:
        return self.path(value) if value.startswith("/") else value


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def localise_kubeadm(documents: list[dict[str, Any]], local: Localiser, api_port: int, etcd_url: str,
                     etcd_files: dict[str, Path]) -> list[dict[str, Any]]:
    by_kind = {d["kind"]: d for d in documents}
    init, cluster = by_kind["InitConfiguration"], by_kind["ClusterConfiguration"]
    # The address the VM advertises (kubeadm would detect its NIC's): the first non-loopback address among the
    # serving certificate's rendered SANs. kubeadm replaces a loopback advertise address by a host interface's
    # (ChooseBindAddress), and the `kubernetes` Endpoints may not hold a loopback address; the API server itself
    # listens on loopback only (start()).
    sans = [s for s in cluster.get("apiServer", {}).get("certSANs", []) if _is_ip(s) and not s.startswith("127.")]
    init["localAPIEndpoint"] = {"advertiseAddress": sans[0] if sans else "10.255.255.1", "bindPort": api_port}
    init.pop("patches", None)
    init["nodeRegistration"] = {**init.get("nodeRegistration", {}), "name": "e2e-apiserver",
                                "criSocket": f"unix://{local.work}/no-kubelet.sock"}
    cluster["certificatesDir"] = local.path("/etc/kubernetes/pki")
    cluster["controlPlaneEndpoint"] = f"127.0.0.1:{api_port}"
    cluster["etcd"] = {"external": {"endpoints": [etcd_url], "caFile": str(etcd_files["ca"]),
                                    "certFile": str(etcd_files["client_cert"]), "keyFile": str(etcd_files["client_key"])}}
    for component in ("apiServer", "controllerManager", "scheduler"):
        section = cluster.get(component, {})
        for arg in section.get("extraArgs", []):
            if arg["name"] == "etcd-servers-overrides":
                # The events etcd of the plan: here the one etcd serves both, through the same flag.
                arg["value"] = "/events#" + etcd_url
            else:
                arg["value"] = local.arg(arg["value"])
        for volume in section.get("extraVolumes", []):
            volume["hostPath"] = local.path(volume["hostPath"])
            volume["mountPath"] = local.path(volume["mountPath"])
    return documents


@dataclass
class ControlPlane:
    work: Path
    api_port: int
    programs: list[Program] = field(default_factory=list)
    kubeadm_log: list[str] = field(default_factory=list)
    egress: Egress = field(default_factory=Egress)
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    """What else runs for this control plane (a Secret volume kept in step), stopped with it."""
    _context: ssl.SSLContext | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.work / "etc" / "kubernetes" / "admin.conf"

    @property
    def pki(self) -> Path:
        return self.work / "etc" / "kubernetes" / "pki"

    def program(self, name: str) -> Program:
        return next(p for p in self.programs if p.name == name)

    def stop(self) -> None:
        for stop in self.stoppers:
            stop()
        for program in reversed(self.programs):
            program.stop()
        self.egress.stop()

    def admin_context(self) -> tuple[ssl.SSLContext, str]:
        """A TLS context with the admin client certificate, and the server URL (made once: threads share it)."""
        with self._lock:
            if self._context is None:
                self._context = self._make_admin_context()
        return self._context, self.server

    def _make_admin_context(self) -> ssl.SSLContext:
        config = yaml.safe_load(self.admin_kubeconfig.read_text())
        user = config["users"][0]["user"]
        folder = self.work / "admin-client"
        folder.mkdir(exist_ok=True)
        for name, key in (("cert", "client-certificate-data"), ("key", "client-key-data")):
            (folder / name).write_bytes(base64.b64decode(user[key]))
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(str(folder / "cert"), str(folder / "key"))
        return context

    def get(self, path: str, user_agent: str = "gpucluster-e2e") -> tuple[int, str]:
        context, server = self.admin_context()
        request = urllib.request.Request(server + path, headers={"User-Agent": user_agent})
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (urllib.error.URLError, OSError) as error:  # not listening yet, or restarting
            return 0, str(error)


def _kubeadm(plane: ControlPlane, config: Path, *args: str, env: dict[str, str] | None = None) -> None:
    program = Program(f"kubeadm {' '.join(args)}", [str(binary("kubernetes", "kubeadm")), *args, "--config", str(config)],
                      plane.work / "logs" / "kubeadm.log", env).start()
    assert program.process is not None
    code = program.process.wait(timeout=300)
    plane.kubeadm_log.append(f"kubeadm {' '.join(args)}: exit {code}")
    if code != 0:
        raise RuntimeError(f"kubeadm {' '.join(args)} failed (exit {code}):\n{program.tail()}")


def _static_pod_command(manifest: Path, local: Localiser) -> list[str]:
    pod = yaml.safe_load(manifest.read_text())
    command = pod["spec"]["containers"][0]["command"]
    return [command[0], *(_localise_flag(a, local) for a in command[1:])]


def _localise_flag(arg: str, local: Localiser) -> str:
    if arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return f"{name}={local.arg(value)}"
    return arg


def wait_until(condition: Callable[[], bool], seconds: float, what: str, program: Program | None = None) -> None:
    """Polls `condition`; the deadline is generous because a loaded machine is slow, never a race."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        if program is not None and not program.running():
            raise RuntimeError(f"{program.name} exited while waiting for {what}:\n{program.tail()}")
        time.sleep(0.5)
    raise TimeoutError(f"{what} not reached in {seconds:.0f}s" + (f":\n{program.tail()}" if program else ""))


def _without_controllers(command: list[str], disabled: tuple[str, ...]) -> list[str]:
    """kube-controller-manager's `--controllers` with some turned off (`-name`), the rest as rendered."""
    if not disabled:
        return command
    off = ",".join(f"-{name}" for name in disabled)
    changed = [f"{a},{off}" if a.startswith("--controllers=") else a for a in command]
    return changed if changed != command else [*command, f"--controllers=*,{off}"]


def start(boot_document: Path, work: Path, disabled_controllers: tuple[str, ...] = ()) -> ControlPlane:
    """`disabled_controllers`: kube-controller-manager controllers a scenario turns off, and says why."""
    api_port, etcd_port, etcd_peer, kcm_port, scheduler_port = free_ports(5)
    local = Localiser(work)
    plane = ControlPlane(work, api_port)
    files = rendered_files(boot_document)
    for path, content in files.items():
        if path.startswith("/etc/kubernetes/") and not path.startswith("/etc/kubernetes/pki/"):
            target = Path(local.path(path))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(local.text(content))
    Path(local.path("/var/log/kubernetes")).mkdir(parents=True, exist_ok=True)
    etcd_files = etcd_pki(Path(local.path("/etc/kubernetes/pki")))
    etcd_url = f"https://127.0.0.1:{etcd_port}"
    documents = list(yaml.safe_load_all(files[KUBEADM_CONFIG]))
    config = Path(local.path(KUBEADM_CONFIG))
    localised = localise_kubeadm(documents, local, api_port, etcd_url, etcd_files)
    config.write_text(yaml.safe_dump_all(localised))
    advertised = next(d for d in localised if d["kind"] == "InitConfiguration")["localAPIEndpoint"]["advertiseAddress"]

    try:
        etcd = Program("etcd", [
            str(binary("etcd")), "--name", "e2e", "--data-dir", str(work / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"e2e=http://127.0.0.1:{etcd_peer}",
            "--cert-file", str(etcd_files["server_cert"]), "--key-file", str(etcd_files["server_key"]),
            "--trusted-ca-file", str(etcd_files["ca"]), "--client-cert-auth",
            "--quota-backend-bytes", str(8 * 1024**3), "--unsafe-no-fsync"], work / "logs" / "etcd.log")
        plane.programs.append(etcd.start())

        _kubeadm(plane, config, "init", "phase", "certs", "all")
        _kubeadm(plane, config, "init", "phase", "kubeconfig", "all", "--kubeconfig-dir", local.path("/etc/kubernetes"))
        # The controller-manager's and scheduler's kubeconfigs name the advertise address (kubeadm's
        # getKubeConfigSpecsBase: localAPIEndpoint), which is the VM's NIC there and no interface here.
        for conf in ("controller-manager.conf", "scheduler.conf"):
            path = Path(local.path(f"/etc/kubernetes/{conf}"))
            path.write_text(path.read_text().replace(f"https://{advertised}:{api_port}", plane.server))
        manifests = work / "static-pods"
        _kubeadm(plane, config, "init", "phase", "control-plane", "all", "--dry-run",
                 env={"KUBEADM_INIT_DRYRUN_DIR": str(manifests)})

        apiserver = _static_pod_command(manifests / "kube-apiserver.yaml", local)
        egress = plane.egress.start(work / "egress.sock").configuration(work / "egress-selector.yaml")
        plane.programs.append(Program("kube-apiserver", [str(binary("kubernetes", "kube-apiserver")), *apiserver[1:],
                                                         "--bind-address=127.0.0.1",
                                                         f"--egress-selector-config-file={egress}"],
                                      work / "logs" / "kube-apiserver.log").start())
        wait_until(lambda: plane.get("/readyz")[0] == 200, 240, "kube-apiserver /readyz", plane.program("kube-apiserver"))
        # The first phase of the VM's `kubeadm init` that talks to the API server uploads the configuration; on the VM
        # init first binds admin.conf's group with super-admin.conf (kubeconfig.EnsureAdminClusterRoleBinding, which
        # runs only for the default /etc/kubernetes/admin.conf): the same binding is made here the same way.
        super_admin = local.path("/etc/kubernetes/super-admin.conf")
        _kubeadm(plane, config, "init", "phase", "upload-config", "all", "--kubeconfig", super_admin)
        bind = subprocess.run([str(binary("kubernetes", "kubectl")), "--kubeconfig", super_admin, "create",
                               "clusterrolebinding", "kubeadm:cluster-admins", "--clusterrole=cluster-admin",
                               "--group=kubeadm:cluster-admins"], capture_output=True, text=True, timeout=60)
        if bind.returncode != 0:
            raise RuntimeError(f"kubeadm:cluster-admins: {bind.stderr}")
        for name, port in (("kube-controller-manager", kcm_port), ("kube-scheduler", scheduler_port)):
            command = _static_pod_command(manifests / f"{name}.yaml", local)
            if name == "kube-controller-manager":
                command = _without_controllers(command, disabled_controllers)
            plane.programs.append(Program(name, [str(binary("kubernetes", name)), *command[1:], f"--secure-port={port}"],
                                          work / "logs" / f"{name}.log").start())
        return plane
    except BaseException:
        plane.stop()
        raise


def json_get(plane: ControlPlane, path: str) -> dict[str, Any]:
    code, body = plane.get(path)
    if code != 200:
        raise RuntimeError(f"GET {path}: {code} {body[:300]}")
    return json.loads(body)


def service_account_kubeconfig(plane: ControlPlane, namespace: str, name: str, folder: Path,
                               seconds: int = 86400) -> Path:
    """A kubeconfig holding a token of the service account (TokenRequest, as a pod's projected token), so a
    program run with it gets exactly the RBAC the stack renders for that account."""
    result = subprocess.run([str(binary("kubernetes", "kubectl")), "--kubeconfig", str(plane.admin_kubeconfig), "create",
                             "token", name, "-n", namespace, f"--duration={seconds}s"],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"token for {namespace}/{name}: {result.stderr.strip()}")
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
              "clusters": [{"name": "e2e", "cluster": {"server": plane.server,
                                                       "certificate-authority": str(plane.pki / "ca.crt")}}],
              "users": [{"name": name, "user": {"token": result.stdout.strip()}}],
              "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": name, "namespace": namespace}}]}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{namespace}-{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path
