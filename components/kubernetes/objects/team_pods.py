"""Team pods stay off the host: Pod Security's baseline checks that keep a pod out of its node, plus IPC_LOCK.

The IMDS guard (objects/imds_guard.py) is a Cilium policy and covers pod-network endpoints only. A pod that shares
its node's network, PID or IPC namespace, runs privileged, mounts a host path (`/run/containerd`, `/proc`), adds a
capability such as SYS_ADMIN, or binds a host port can reach the node itself; on a system node (untainted, carrying
the add-on identities) that means IMDS and the autoscaler's or node-lifecycle's token. This
ValidatingAdmissionPolicy refuses those in every namespace labelled `gpucluster.io/team` (the team namespaces,
objects/kueue.py `team_namespace`), for containers, init containers and ephemeral containers, and on the
`pods/ephemeralcontainers` subresource `kubectl debug` writes.

Why not Pod Security admission itself: its `baseline` level refuses every capability outside its list
(k8s.io/pod-security-admission `policy/check_capabilities_baseline.go`, extracted into
components/catalog/facts/pod_security_baseline.json by tools/pod_security_baseline.py), and a training pod adds
IPC_LOCK to register memory with its HCAs (docs/scheduling.md); a level cannot be widened by one capability. So the policy
takes every baseline check at v0.36.4 (`policy/check_*.go`, the files named beside each rule below) as baseline
states it, with the one difference that IPC_LOCK is allowed. The allowed SELinux types and safe sysctls are extracted
into the same catalogue; the AppArmor and seccomp profile types are the API's enum values the checks name.
Pod Security admission's own `audit` label at `baseline` is set on each team namespace too (objects/kueue.py
`team_namespace`), so a pod the policy lets through by IPC_LOCK is marked in the API server's audit log.
"""

from __future__ import annotations

import json

from gpucluster.catalog.fact_files import load_facts
from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.vocabulary import LABEL_TEAM

POLICY = "gpucluster-team-pods-off-host"
BASELINE = load_facts("pod_security_baseline.json")
ALLOWED_CAPABILITIES = (*BASELINE["capabilities"], "IPC_LOCK")
"""Pod Security baseline's list, and IPC_LOCK for RDMA memory registration."""
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _unset(path: str) -> str:
    parent, _, field = path.rpartition(".")
    return f"(!has({parent}.{field}) || !{path})"


def _every_container(condition: str) -> str:
    """`condition` (over `c`) holds for every container of every kind the pod has."""
    return " && ".join(f"(!has(object.spec.{kind}) || object.spec.{kind}.all(c, {condition}))"
                       for kind in CONTAINER_LISTS)


NOT_PRIVILEGED = _every_container(f"!has(c.securityContext) || {_unset('c.securityContext.privileged')}")
ALLOWED_ADDS = _every_container(
    "!has(c.securityContext) || !has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
    f"c.securityContext.capabilities.add.all(a, a in {json.dumps(list(ALLOWED_CAPABILITIES))})")
NO_HOST_PORTS = _every_container("!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)")
NO_HOST_PATHS = "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))"


def _when(path: str, condition: str) -> str:
    """`condition` holds wherever `path` (a dotted field path, each step optional) is set."""
    steps = path.split(".")
    absent = [f"!has({'.'.join(steps[:i])})" for i in range(2, len(steps) + 1)]
    return f"({' || '.join(absent)} || {condition})"


def _pod_and_containers(field: str, condition: str) -> str:
    """`condition` over `{p}` (the field's path) for the pod's securityContext.<field> and every container's."""
    pod, container = f"object.spec.securityContext.{field}", f"c.securityContext.{field}"
    return (f"{_when(pod, condition.replace('{p}', pod))} && "
            + _every_container(_when(container, condition.replace("{p}", container))))


PROFILE_TYPES = ["RuntimeDefault", "Localhost"]
"""check_appArmorProfile.go allowedProfileType, check_seccompProfile_baseline.go validSeccomp."""
NOT_HOST_PROCESS = _pod_and_containers("windowsOptions", "!has({p}.hostProcess) || !{p}.hostProcess")
APPARMOR = (_pod_and_containers("appArmorProfile", f"{{p}}.type in {json.dumps(PROFILE_TYPES)}") + " && "
            # allowedAnnotationValue: empty, runtime/default or localhost/<profile>
            "(!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
            "!k.startsWith('container.apparmor.security.beta.kubernetes.io/') || "
            "object.metadata.annotations[k] in ['', 'runtime/default'] || "
            "object.metadata.annotations[k].startsWith('localhost/')))")
SECCOMP = _pod_and_containers("seccompProfile", f"{{p}}.type in {json.dumps(PROFILE_TYPES)}")
SELINUX = _pod_and_containers(
    "seLinuxOptions", f"(!has({{p}}.type) || {{p}}.type in {json.dumps(BASELINE['selinuxTypes'])}) && "
    "(!has({p}.user) || {p}.user == '') && (!has({p}.role) || {p}.role == '')")
PROC_MOUNT = ("(has(object.spec.hostUsers) && !object.spec.hostUsers) || "  # a user-namespaced pod (1.35 baseline)
              + _every_container(_when("c.securityContext.procMount", "c.securityContext.procMount == 'Default'")))
SYSCTLS = _when("object.spec.securityContext.sysctls",
                f"object.spec.securityContext.sysctls.all(s, s.name in {json.dumps(BASELINE['sysctls'])})")
HANDLERS = [f"{probe}.{kind}" for probe in ("livenessProbe", "readinessProbe", "startupProbe",
                                            "lifecycle.postStart", "lifecycle.preStop")
            for kind in ("httpGet", "tcpSocket")]
NO_PROBE_HOSTS = _every_container(" && ".join(_when(f"c.{h}.host", f"c.{h}.host == ''") for h in HANDLERS))


def team_pod_policy() -> list[Object]:
    why = ("on a system node it reaches IMDS (169.254.169.254) and the add-on identities' tokens; the IMDS guard "
           "covers pod-network pods only (docs/capacity.md)")
    rule = "a pod in a team namespace may not"
    policy = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", POLICY, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": LABEL_TEAM, "operator": "Exists"}]},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
                # `kubectl debug` adds an ephemeral container through this subresource (an UPDATE of the Pod).
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                 "resources": ["pods/ephemeralcontainers"]}]},
        "validations": [
            {"expression": _unset("object.spec.hostNetwork"),
             "message": f"{rule} use the host network (spec.hostNetwork): {why}"},
            {"expression": _unset("object.spec.hostPID"),
             "message": f"{rule} share the host PID namespace (spec.hostPID): {why}"},
            {"expression": _unset("object.spec.hostIPC"),
             "message": f"{rule} share the host IPC namespace (spec.hostIPC): {why}"},
            {"expression": NOT_PRIVILEGED,
             "message": f"{rule} run a privileged container, init or ephemeral container "
                        f"(securityContext.privileged): {why}"},
            {"expression": NO_HOST_PATHS,
             "message": f"{rule} mount a host path (volumes[].hostPath): {why}"},
            {"expression": ALLOWED_ADDS,
             "message": f"{rule} add a capability beyond Pod Security baseline's and IPC_LOCK "
                        f"(securityContext.capabilities.add; allowed: {', '.join(ALLOWED_CAPABILITIES)}): {why}"},
            {"expression": NO_HOST_PORTS,
             "message": f"{rule} bind a host port (ports[].hostPort): {why}"},
            # The rest of baseline, as it stands (policy/check_<name>.go at v0.36.4).
            {"expression": NOT_HOST_PROCESS,
             "message": f"{rule} run a Windows HostProcess container (windowsOptions.hostProcess; Pod Security "
                        "baseline, check_windowsHostProcess.go)"},
            {"expression": APPARMOR,
             "message": f"{rule} set an AppArmor profile other than RuntimeDefault or Localhost (appArmorProfile, "
                        "or the container.apparmor.security.beta.kubernetes.io annotation; Pod Security baseline, "
                        "check_appArmorProfile.go)"},
            {"expression": SECCOMP,
             "message": f"{rule} set a seccomp profile other than RuntimeDefault or Localhost (seccompProfile.type; "
                        "Pod Security baseline, check_seccompProfile_baseline.go)"},
            {"expression": SELINUX,
             "message": f"{rule} set a custom SELinux user or role, or a type outside "
                        f"{', '.join(t for t in BASELINE['selinuxTypes'] if t)} (seLinuxOptions; Pod Security "
                        "baseline, check_seLinuxOptions.go)"},
            {"expression": PROC_MOUNT,
             "message": f"{rule} unmask /proc (securityContext.procMount other than Default) outside a user "
                        "namespace (Pod Security baseline, check_procMount_baseline.go)"},
            {"expression": SYSCTLS,
             "message": f"{rule} set a sysctl outside Pod Security baseline's safe set (securityContext.sysctls; "
                        f"allowed: {', '.join(BASELINE['sysctls'])}; check_sysctls.go)"},
            {"expression": NO_PROBE_HOSTS,
             "message": f"{rule} point a probe or lifecycle handler at another host (httpGet.host, tcpSocket.host; "
                        "Pod Security baseline, check_hostProbesAndhostLifecycle.go)"},
        ]})
    binding = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", POLICY, spec={
        "policyName": POLICY, "validationActions": ["Deny"]})
    return [policy, binding]
