"""Team pods stay off the host (components/kubernetes/objects/team_pods.py): the ValidatingAdmissionPolicy evaluated
by cel-python as kube-apiserver binds it (`object`: the Pod; validationActions Deny), and its namespace selector
against the team namespaces the plan renders. Source of the refusal's reason: IMDS answers any process on the VM
(docs/capacity.md); the IMDS guard is a Cilium policy over pod-network endpoints (objects/imds_guard.py)."""

from __future__ import annotations

import copy
from typing import Any

import celpy
from celpy.adapter import json_to_cel

from gpucluster.kubernetes.objects.kueue import kueue_objects
from gpucluster.kubernetes.objects.team_pods import POLICY, team_pod_policy
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec

_ENV = celpy.Environment()
TRAINING_POD = {"spec": {"containers": [{"name": "trainer", "image": "t", "securityContext": {
    "capabilities": {"add": ["IPC_LOCK"]}}, "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
"""docs/scheduling.md's training pod: IPC_LOCK (which Pod Security baseline would refuse), no host namespaces."""


def _refusals(pod: dict[str, Any]) -> list[str]:
    spec = team_pod_policy()[0]["spec"]
    activation = {"object": json_to_cel(pod)}
    return [v["message"] for v in spec["validations"]
            if not bool(_ENV.program(_ENV.compile(v["expression"])).evaluate(activation))]


def _with(change: Any) -> dict[str, Any]:
    pod = copy.deepcopy(TRAINING_POD)
    change(pod)
    return pod


def test_a_training_pod_is_admitted() -> None:
    assert _refusals(TRAINING_POD) == []
    assert _refusals(_with(lambda p: p["spec"].update(hostNetwork=False))) == []


def test_host_network_host_pid_and_privileged_are_refused_with_the_reason() -> None:
    [host] = _refusals(_with(lambda p: p["spec"].update(hostNetwork=True)))
    assert "may not use the host network" in host and "IMDS (169.254.169.254)" in host
    assert len(_refusals(_with(lambda p: p["spec"].update(hostPID=True)))) == 1
    assert len(_refusals(_with(lambda p: p["spec"]["containers"][0]["securityContext"].update(privileged=True)))) == 1
    init = {"name": "init", "image": "i", "securityContext": {"privileged": True}}
    assert len(_refusals(_with(lambda p: p["spec"].update(initContainers=[init])))) == 1


def test_the_policy_selects_every_team_namespace_and_prod_declares_it() -> None:
    objects = kueue_objects(plan_cluster(stack_spec("prod")).scheduling)
    policy = next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == POLICY)
    [expression] = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    assert namespaces and all(expression["key"] in o["metadata"]["labels"] for o in namespaces)
    assert expression["operator"] == "Exists"
    assert any(o["kind"] == "ValidatingAdmissionPolicyBinding" and o["spec"]["policyName"] == POLICY for o in objects)


SYSTEM_NODE_ESCAPE = {"spec": {
    "nodeSelector": {"kubernetes.io/hostname": "system-000000"},
    "volumes": [{"name": "containerd", "hostPath": {"path": "/run/containerd"}},
                {"name": "proc", "hostPath": {"path": "/proc"}}],
    "containers": [{"name": "c", "image": "i", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                    "volumeMounts": [{"name": "containerd", "mountPath": "/host/containerd"}]}]}}
"""A team pod pinned to a system node with the containerd socket, the host's /proc and SYS_ADMIN: none of the first
three checks sees it."""


def test_host_paths_capabilities_host_ipc_and_host_ports_are_refused() -> None:
    refused = _refusals(SYSTEM_NODE_ESCAPE)
    assert [m.split(":")[0] for m in refused] == [
        "a pod in a team namespace may not mount a host path (volumes[].hostPath)",
        "a pod in a team namespace may not add a capability beyond Pod Security baseline's and IPC_LOCK "
        "(securityContext.capabilities.add; allowed"]
    assert len(_refusals(_with(lambda p: p["spec"].update(hostIPC=True)))) == 1
    port = {"containerPort": 80, "hostPort": 8080}
    assert len(_refusals(_with(lambda p: p["spec"]["containers"][0].update(ports=[port])))) == 1
    assert _refusals(_with(lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 80}]))) == []


def test_ephemeral_containers_are_judged_and_their_subresource_is_matched() -> None:
    debug = {"name": "debug", "image": "i", "securityContext": {"privileged": True}}
    assert len(_refusals(_with(lambda p: p["spec"].update(ephemeralContainers=[debug])))) == 1
    rules = team_pod_policy()[0]["spec"]["matchConstraints"]["resourceRules"]
    assert {"resources": ["pods/ephemeralcontainers"], "operations": ["UPDATE"], "apiGroups": [""],
            "apiVersions": ["v1"]} in rules


def test_the_allowed_capabilities_are_baselines_extracted_list_and_ipc_lock() -> None:
    from gpucluster.kubernetes.objects.team_pods import ALLOWED_CAPABILITIES, BASELINE

    staging = "v0." + stack_spec("prod").kubernetes_version.split(".", 1)[1]  # the release's staging module
    assert BASELINE["source"].startswith(f"k8s.io/pod-security-admission@{staging} ")
    assert ALLOWED_CAPABILITIES[-1] == "IPC_LOCK" and "SYS_ADMIN" not in ALLOWED_CAPABILITIES
    assert {"CHOWN", "NET_BIND_SERVICE", "SYS_CHROOT"} <= set(ALLOWED_CAPABILITIES)
    for capability in BASELINE["capabilities"]:
        adds = _with(lambda p, c=capability: p["spec"]["containers"][0]["securityContext"]["capabilities"]
                     .update(add=["IPC_LOCK", c]))
        assert _refusals(adds) == [], capability


def _container_context(**fields: Any) -> Any:
    return lambda p: p["spec"]["containers"][0]["securityContext"].update(fields)


def _pod_context(**fields: Any) -> Any:
    return lambda p: p["spec"].setdefault("securityContext", {}).update(fields)


BASELINE_REFUSED: dict[str, tuple[Any, str]] = {
    "Windows HostProcess": (_pod_context(windowsOptions={"hostProcess": True}), "HostProcess"),
    "AppArmor unconfined": (_container_context(appArmorProfile={"type": "Unconfined"}), "AppArmor"),
    "AppArmor annotation": (lambda p: p.setdefault("metadata", {}).setdefault("annotations", {}).update(
        {"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}), "AppArmor"),
    "seccomp unconfined": (_pod_context(seccompProfile={"type": "Unconfined"}), "seccomp"),
    "seccomp unconfined in a container": (_container_context(seccompProfile={"type": "Unconfined"}), "seccomp"),
    "SELinux spc_t": (_container_context(seLinuxOptions={"type": "spc_t"}), "SELinux"),
    "SELinux user": (_pod_context(seLinuxOptions={"user": "system_u"}), "SELinux"),
    "unmasked /proc": (_container_context(procMount="Unmasked"), "/proc"),
    "an unsafe sysctl": (_pod_context(sysctls=[{"name": "kernel.msgmax", "value": "1"}]), "sysctl"),
    "a probe on another host": (lambda p: p["spec"]["containers"][0].update(
        livenessProbe={"httpGet": {"host": "169.254.169.254", "port": 80}}), "probe"),
    "a preStop on another host": (lambda p: p["spec"]["containers"][0].update(
        lifecycle={"preStop": {"tcpSocket": {"host": "10.0.0.1", "port": 22}}}), "lifecycle"),
}


def test_the_rest_of_baseline_is_refused_one_rule_each() -> None:
    """Each of baseline's other checks (k8s.io/pod-security-admission v0.36.4 policy/check_*.go) refuses its case
    with its own message, and only that one."""
    for what, (change, word) in BASELINE_REFUSED.items():
        refusals = _refusals(_with(change))
        assert len(refusals) == 1 and word in refusals[0], (what, refusals)


def test_what_baseline_allows_is_admitted() -> None:
    allowed = [
        _pod_context(seccompProfile={"type": "RuntimeDefault"}, appArmorProfile={"type": "Localhost",
                                                                                 "localhostProfile": "p"}),
        _container_context(seLinuxOptions={"type": "container_t", "level": "s0:c1"}, procMount="Default"),
        _pod_context(sysctls=[{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]),
        lambda p: p["spec"]["containers"][0].update(readinessProbe={"httpGet": {"port": 8080, "host": ""}}),
        lambda p: p.setdefault("metadata", {}).setdefault("annotations", {}).update(
            {"container.apparmor.security.beta.kubernetes.io/trainer": "localhost/train"}),
        # a pod in its own user namespace may unmask /proc (baseline from 1.35)
        lambda p: (p["spec"].update(hostUsers=False), _container_context(procMount="Unmasked")(p)),
    ]
    for change in allowed:
        assert _refusals(_with(change)) == []


def test_team_namespaces_are_audited_at_baseline() -> None:
    objects = kueue_objects(plan_cluster(stack_spec("prod")).scheduling)
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    assert namespaces and all(o["metadata"]["labels"]["pod-security.kubernetes.io/audit"] == "baseline"
                              for o in namespaces)
