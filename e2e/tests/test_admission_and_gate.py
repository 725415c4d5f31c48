"""What the real server decides about our objects: the team-pod ValidatingAdmissionPolicy evaluated by kube-apiserver's
own CEL, and the CNI readiness gate's script run with bash and curl against the real server, whose JSON for curl is
pretty-printed."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from e2e import control_plane as cp
from e2e.cluster import Stack, kubectl
from e2e.report import E2EReport
from gpucluster.kubernetes.readiness_gate import READINESS_SCRIPT, ReadinessGate

TEAM_NAMESPACE = "team-research"


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": TEAM_NAMESPACE},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1"}], **spec}}


def test_a_team_pod_on_the_host_network_is_refused(dev_stack: Stack, report: E2EReport) -> None:
    def attempt() -> subprocess.CompletedProcess[str]:
        return kubectl(dev_stack.plane, "create", "--dry-run=server", "-f", "-",
                       stdin=json.dumps(_pod("host", hostNetwork=True)))

    # A new policy is enforced once the API server's admission plugin has loaded it, a moment after its creation
    # (seen here: the first request after the stack was applied was admitted): the refusal is awaited for up to a
    # minute, and a policy that never refuses fails.
    results: list[subprocess.CompletedProcess[str]] = []
    cp.wait_until(lambda: results.append(attempt()) or results[-1].returncode != 0, 60, "the policy refusing")
    refused = results[-1]
    plain = kubectl(dev_stack.plane, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(_pod("plain")))
    report.scenario("team pod with hostNetwork refused by the real ValidatingAdmissionPolicy",
                    "passed" if refused.returncode != 0 and plain.returncode == 0 else "failed",
                    refused=refused.stderr.strip(), plain=plain.stderr.strip())
    assert refused.returncode != 0 and "gpucluster-team-pods-off-host" in refused.stderr, refused.stderr
    assert plain.returncode == 0, plain.stderr


ESCAPES: dict[str, dict[str, Any]] = {
    # Pinned by node selector: Kueue gates every team pod, and the API server refuses a gated pod's spec.nodeName.
    "host paths and SYS_ADMIN on a system node": {
        "nodeSelector": {"kubernetes.io/hostname": "system-z1-00-000000"},
        "volumes": [{"name": "containerd", "hostPath": {"path": "/run/containerd"}},
                    {"name": "proc", "hostPath": {"path": "/proc"}}],
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                        "volumeMounts": [{"name": "proc", "mountPath": "/host/proc"}]}]},
    "SYS_ADMIN": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                                  "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]},
    "host IPC": {"hostIPC": True},
    "a host port": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                                    "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
    # The rest of Pod Security baseline, which the policy takes as it stands.
    "seccomp unconfined": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
    "AppArmor unconfined": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                                            "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]},
    "SELinux spc_t": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}},
    "an unsafe sysctl": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}},
    "a probe on IMDS": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1", "livenessProbe": {
        "httpGet": {"host": "169.254.169.254", "path": "/metadata/identity/oauth2/token", "port": 80}}}]},
}


def test_a_team_pod_that_reaches_into_its_node_is_refused(dev_stack: Stack, report: E2EReport) -> None:
    """The real kube-apiserver's CEL refuses each way into a node the first three checks missed, and the rest of
    Pod Security baseline; IPC_LOCK passes."""
    cp.wait_until(lambda: kubectl(dev_stack.plane, "create", "--dry-run=server", "-f", "-",
                                  stdin=json.dumps(_pod("probe", hostNetwork=True))).returncode != 0,
                  60, "the policy refusing")
    outcomes = {what: kubectl(dev_stack.plane, "create", "--dry-run=server", "-f", "-",
                              stdin=json.dumps(_pod(f"escape-{i}", **spec)))
                for i, (what, spec) in enumerate(ESCAPES.items())}
    training = kubectl(dev_stack.plane, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(_pod(
        "training", containers=[{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                                 "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}])))
    refused = {what: done.returncode != 0 and "gpucluster-team-pods-off-host" in done.stderr
               for what, done in outcomes.items()}
    report.scenario("team pods reaching into their node refused by the real ValidatingAdmissionPolicy",
                    "passed" if all(refused.values()) and training.returncode == 0 else "failed",
                    refused=refused, training=training.stderr.strip())
    assert all(refused.values()), {w: d.stderr for w, d in outcomes.items()}
    assert "may not mount a host path" in outcomes["host paths and SYS_ADMIN on a system node"].stderr
    # kube-apiserver answers with the first validation that fails; each way in is also tried alone
    assert "add a capability beyond" in outcomes["SYS_ADMIN"].stderr
    assert "share the host IPC namespace" in outcomes["host IPC"].stderr
    assert "bind a host port" in outcomes["a host port"].stderr
    assert training.returncode == 0, training.stderr


def test_a_privileged_ephemeral_container_is_refused(dev_stack: Stack, report: E2EReport) -> None:
    """`kubectl debug --profile=sysadmin` writes a privileged ephemeral container through pods/ephemeralcontainers."""
    kubectl(dev_stack.plane, "delete", "pod", "debug-target", "-n", TEAM_NAMESPACE, "--ignore-not-found")
    created = kubectl(dev_stack.plane, "create", "-f", "-", stdin=json.dumps(_pod("debug-target")))
    assert created.returncode == 0, created.stderr
    path = f"/api/v1/namespaces/{TEAM_NAMESPACE}/pods/debug-target/ephemeralcontainers"

    def attempt() -> subprocess.CompletedProcess[str]:
        pod = json.loads(kubectl(dev_stack.plane, "get", "pod", "debug-target", "-n", TEAM_NAMESPACE,
                                 "-o", "json").stdout)
        pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "registry.k8s.io/pause:3.10.1",
                                               "securityContext": {"privileged": True}}]
        return kubectl(dev_stack.plane, "replace", "--raw", path, "-f", "-", stdin=json.dumps(pod))

    # Kueue's pod controller updates the new pod (it is a team pod, Kueue's): a replace from a read before that
    # update is a Conflict, and is read again, as kubectl debug would.
    answers: list[subprocess.CompletedProcess[str]] = []
    cp.wait_until(lambda: answers.append(attempt()) or "Conflict" not in answers[-1].stderr, 60,
                  "an ephemeral-container write that is not a Conflict")
    patched = answers[-1]
    kubectl(dev_stack.plane, "delete", "pod", "debug-target", "-n", TEAM_NAMESPACE, "--wait=false")
    report.scenario("privileged ephemeral container refused on pods/ephemeralcontainers",
                    "passed" if patched.returncode != 0 and "privileged" in patched.stderr else "failed",
                    answer=patched.stderr.strip())
    assert patched.returncode != 0 and "gpucluster-team-pods-off-host" in patched.stderr, patched.stderr


def _failed_creates(plane: cp.ControlPlane) -> list[str]:
    events = cp.json_get(plane, "/api/v1/events")["items"]
    return [f"{e['involvedObject']['namespace']}/{e['involvedObject']['name']}: {e['message']}" for e in events
            if e.get("reason") == "FailedCreate"]


def test_every_platform_pod_is_admitted(dev_stack: Stack, report: E2EReport) -> None:
    """The controllers create every platform workload's pods: no FailedCreate from admission (the health-nodes
    policy, the team-pods policy, pod security) for any of them."""
    workloads = [k for k in dev_stack.applied.applied if " Deployment/" in k or " DaemonSet/" in k]
    cp.wait_until(lambda: bool(cp.json_get(dev_stack.plane, "/api/v1/pods")["items"]), 120, "the first pods")
    failed = _failed_creates(dev_stack.plane)
    report.scenario("every platform pod admitted", "failed" if failed else "passed", workloads=len(workloads),
                    failed_creates=failed)
    assert workloads and not failed


def _gate(plane: cp.ControlPlane, namespace: str, name: str, timeout: int) -> subprocess.CompletedProcess[str]:
    gate = ReadinessGate(namespace, name, timeout_seconds=timeout)
    env = gate.environment(plane.admin_kubeconfig.read_text())
    return subprocess.run(["/bin/bash", "-c", READINESS_SCRIPT], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=timeout + 60)


def test_the_cni_gate_reads_a_real_daemonsets_counts(dev_stack: Stack, report: E2EReport) -> None:
    """node-exporter's DaemonSet as dev renders it, its pods run by kwok on every node: the gate must read the
    counts from the server's answer to curl (pretty JSON) and pass."""
    status = _daemonset_status(dev_stack.plane, "gpucluster-metrics", "node-exporter")
    cp.wait_until(lambda: (s := _daemonset_status(dev_stack.plane, "gpucluster-metrics", "node-exporter"))
                  .get("desiredNumberScheduled", 0) > 0 and s.get("numberReady") == s.get("desiredNumberScheduled"),
                  300, "node-exporter ready on its nodes (status: "
                  f"{_daemonset_status(dev_stack.plane, 'gpucluster-metrics', 'node-exporter')})")
    status = _daemonset_status(dev_stack.plane, "gpucluster-metrics", "node-exporter")
    code, body = dev_stack.plane.get("/apis/apps/v1/namespaces/gpucluster-metrics/daemonsets/node-exporter",
                                     user_agent="curl/7.88.1")
    result = _gate(dev_stack.plane, "gpucluster-metrics", "node-exporter", 30)
    report.scenario("CNI gate script (bash, curl) against the real API server", "passed" if result.returncode == 0
                    else "failed", desired=status["desiredNumberScheduled"], ready=status["numberReady"],
                    pretty_for_curl='"desiredNumberScheduled": ' in body, output=(result.stdout + result.stderr).strip())
    assert code == 200 and '"desiredNumberScheduled": ' in body  # what the server answers curl
    assert result.returncode == 0, result.stderr
    assert f"ready on {status['numberReady']} of {status['desiredNumberScheduled']} nodes" in result.stdout


def _daemonset_status(plane: cp.ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return cp.json_get(plane, f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}").get("status", {})
