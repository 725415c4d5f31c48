"""Our node daemons (agents/) run as the agents image runs them (`python3 <script> <args>`, the
scripts side by side), against the real kube-apiserver, each with a token of its own ServiceAccount: the account, its
roles and bindings, and the admission policies that match its requests are those the stack deploying the daemon renders
(dev's, applied by `dev_stack`; prod's and gb300's applied here for the daemons only they run). RBAC, admission,
status codes and JSON are therefore the real server's. Azure (IMDS, ARM) is the offline suites' fakes. The
interpreter is this repository's (the image's base is python 3.12; the scripts use the standard library only).

Every run is checked for a refusal (403) twice: in the daemon's own log (reads are not audited) and in the API server's
audit log, which records every write at Metadata level with its status.

The nodes are kwok nodes created here from the stacks' node templates, and deleted after: dev's own nodes are left to
the other scenarios, whatever order they run in.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import control_plane as cp
from e2e.cluster import Applied, Stack, apply_files, apply_objects, kubectl
from e2e.kwok import NodeTemplate, node_templates
from e2e.processes import Program
from e2e.report import E2EReport
from e2e.tests.conftest import plan_stack
from gpucluster.agents import health_agent as ha
from gpucluster.agents import rack_clique as rc
from gpucluster.agents import rollout as ro
from gpucluster.kubernetes.objects.balloons import NAMESPACE as BALLOONS
from gpucluster.planning.agents_image import CONTEXT
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.fence import FENCE
from gpucluster.vocabulary import LABEL_POOL
from tests.support import ipam_world, rollout_world
from tests.support.fake_kube import FakeAzure
from tests.support.stacks import stack_spec
from tests.test_dcgm_shapes import diag_report, health_report

APP_LABEL = "app.kubernetes.io/name"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
"""What the server adds to the user of a token bound to a pod: the pod's node (the health agent's policy reads it)."""
REFUSAL = re.compile(r"(?:^|\s)403: |HTTP 403\b|\"code\":\s*403\b")
"""How a 403 shows in a daemon's log: kube_client's ApiError (`403: GET ...`), a refused watch, a Status body."""
PASSING_DIAG = diag_report({"memory": ["pass"], "pcie": ["pass"]})
FAILING_HEALTH = health_report("fail", {0: {"Memory system": ("fail", "a row remap failure on GPU 0")}})


# What the stacks render.

@dataclass(frozen=True)
class Daemon:
    """One container of a rendered workload that runs one of our scripts."""

    script: str
    workload: dict[str, Any]
    pod: dict[str, Any]
    container: dict[str, Any]

    @property
    def namespace(self) -> str:
        return self.workload["metadata"]["namespace"]

    @property
    def account(self) -> str:
        return self.pod["serviceAccountName"]

    @property
    def args(self) -> list[str]:
        command = self.container["command"]
        return command[command.index(f"/opt/gpucluster/{self.script}") + 1:]

    @property
    def env(self) -> dict[str, str]:
        return {e["name"]: e["value"] for e in self.container.get("env") or [] if "value" in e}


def _manifests(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    return [(p, o) for p in sorted((out / "manifests").glob("*.yaml")) for o in yaml.safe_load_all(p.read_text()) if o]


def daemons(out: Path, script: str) -> list[Daemon]:
    found = []
    for _, o in _manifests(out):
        if o["kind"] in ("DaemonSet", "Deployment"):
            pod = o["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":
            pod = o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        else:
            continue
        found += [Daemon(script, o, pod, c) for c in [*pod.get("initContainers", []), *pod["containers"]]
                  if f"/opt/gpucluster/{script}" in c.get("command", [])]
    return found


def _object_key(o: dict[str, Any]) -> str:
    namespace = o["metadata"].get("namespace")
    return f"{o['kind']}/{namespace + '/' if namespace else ''}{o['metadata']['name']}"


def account_files(out: Path, namespace: str, account: str) -> list[Path]:
    """The manifests that make `account` what its stack renders: its Namespace, the ServiceAccount, the bindings that
    name it and their (Cluster)Roles, and the ValidatingAdmissionPolicies (with their bindings) that match its
    requests. In rank order, so a Namespace comes before what lives in it."""
    user = f"system:serviceaccount:{namespace}:{account}"
    objects = _manifests(out)

    def binds(o: dict[str, Any]) -> bool:
        return o["kind"] in ("RoleBinding", "ClusterRoleBinding") and any(
            s.get("kind") == "ServiceAccount" and s.get("name") == account and s.get("namespace") == namespace
            for s in o.get("subjects") or [])

    bindings = [o for _, o in objects if binds(o)]
    roles = {(b["roleRef"]["kind"], b["metadata"].get("namespace") if b["roleRef"]["kind"] == "Role" else None,
              b["roleRef"]["name"]) for b in bindings}
    policies = {o["metadata"]["name"] for _, o in objects if o["kind"] == "ValidatingAdmissionPolicy"
                and user in json.dumps(o["spec"].get("matchConditions") or [])}

    def wanted(o: dict[str, Any]) -> bool:
        kind, meta = o["kind"], o["metadata"]
        return ((kind == "Namespace" and meta["name"] == namespace)
                or (kind == "ServiceAccount" and (meta.get("namespace"), meta["name"]) == (namespace, account))
                or binds(o) or (kind, meta.get("namespace"), meta["name"]) in roles
                or (kind == "ValidatingAdmissionPolicy" and meta["name"] in policies)
                or (kind == "ValidatingAdmissionPolicyBinding" and o["spec"]["policyName"] in policies))

    return sorted({p for p, o in objects if wanted(o)})


def dev_rendered_and_applied(stack: Stack, daemon: Daemon) -> list[str]:
    """The account's objects dev renders, each checked applied by `dev_stack` (a refusal there would leave the
    daemon without the grant it is about to be tested with)."""
    files = account_files(stack.out, daemon.namespace, daemon.account)
    missing = [p.name for p in files if not any(a.startswith(f"manifests/{p.name}:") for a in stack.applied.applied)]
    refused = {k: v for k, v in stack.applied.refused.items() if any(k.startswith(f"manifests/{n}:") for n in missing)}
    assert files and not missing, refused or missing
    return [a for p in files for a in stack.applied.applied if a.startswith(f"manifests/{p.name}:")]


ApplyAccount = Callable[[Path, Daemon], list[str]]


@pytest.fixture
def foreign_account(dev_stack: Stack) -> Iterator[ApplyAccount]:
    """Applies another stack's objects for one daemon's account onto dev's control plane (its Namespace only when
    missing); what dev does not render itself is deleted afterwards."""
    dev_keys = {_object_key(o) for _, o in _manifests(dev_stack.out)}
    applied: list[tuple[Path, dict[str, Any]]] = []

    def apply(out: Path, daemon: Daemon) -> list[str]:
        files = []
        for path in account_files(out, daemon.namespace, daemon.account):
            objects = [o for o in yaml.safe_load_all(path.read_text()) if o]
            if any(o["kind"] == "Namespace" for o in objects) and kubectl(
                    dev_stack.plane, "get", "namespace", daemon.namespace).returncode == 0:
                continue
            files.append(path)
            applied.extend((path, o) for o in objects)
        result = Applied()
        apply_files(dev_stack.plane, files, result)
        assert files and not result.refused, result.refused
        return result.applied

    yield apply
    for _, o in reversed(applied):
        if _object_key(o) not in dev_keys:
            kubectl(dev_stack.plane, "delete", "-f", "-", "--ignore-not-found", "--wait=false", stdin=json.dumps(o))


def templates(stack: str, out: Path) -> list[NodeTemplate]:
    return [t for t, _ in node_templates(plan_cluster(stack_spec(stack)), out)]


# Running a daemon.

def account_dir(plane: cp.ControlPlane, namespace: str, account: str, folder: Path, pod: str | None = None) -> Path:
    """A folder laid out as a pod's service-account mount (`token`, `ca.crt`). With `pod`, the token is bound to that
    pod as the kubelet's projected token is, so the server adds the pod's node to the user's extra (what the health
    agent's admission policy reads); without, it is `service_account_kubeconfig`'s TokenRequest."""
    folder.mkdir(parents=True, exist_ok=True)
    if pod is None:
        config = yaml.safe_load(cp.service_account_kubeconfig(plane, namespace, account, folder / "kubeconfig").read_text())
        token = config["users"][0]["user"]["token"]
    else:
        made = kubectl(plane, "create", "token", account, "-n", namespace, "--duration=3600s",
                       "--bound-object-kind=Pod", f"--bound-object-name={pod}")
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
    (folder / "token").write_text(token)
    shutil.copyfile(plane.pki / "ca.crt", folder / "ca.crt")
    return folder


def environment(plane: cp.ControlPlane, account: Path, rendered: dict[str, str] | None = None, **more: str) -> dict[str, str]:
    """The `rendered` container environment, pointed at this API server and account folder, with `more` on top."""
    return {**(rendered or {}), "KUBE_API": plane.server, "KUBE_SA_DIR": str(account), **more}


def _command(script: str, args: list[str]) -> list[str]:
    # -E -s: nothing from this repository's environment; the script imports its neighbours as in the image. -u: the
    # image's PYTHONUNBUFFERED=1 (which -E ignores), so a daemon stopped here has logged all it printed.
    return [sys.executable, "-E", "-s", "-u", str(CONTEXT / script), *args]


def run_script(script: str, args: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(script, args), env={**os.environ, **env}, cwd="/", capture_output=True, text=True,
                          timeout=timeout)


def start_script(name: str, script: str, args: list[str], env: dict[str, str], log: Path) -> Program:
    return Program(name, _command(script, args), log, env).start()


def refusals(text: str) -> list[str]:
    return [line for line in text.splitlines() if REFUSAL.search(line)]


def audited(plane: cp.ControlPlane, namespace: str, account: str) -> list[dict[str, Any]]:
    """The account's audited requests (writes: the policy leaves reads out), completed."""
    user = f"system:serviceaccount:{namespace}:{account}"
    folder = Path(cp.Localiser(plane.work).path("/var/log/kubernetes"))
    events = []
    for path in sorted(folder.glob("audit*.log")):
        with path.open(errors="replace") as lines:
            for line in lines:
                if user not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("stage") == "ResponseComplete" and event.get("user", {}).get("username") == user:
                    events.append(event)
    return events


def described(event: dict[str, Any]) -> str:
    ref, status = event.get("objectRef", {}), event.get("responseStatus", {})
    where = "/".join(x for x in (ref.get("resource"), ref.get("subresource"), ref.get("namespace"), ref.get("name")) if x)
    return f"{event['verb']} {where}: {status.get('code')} {status.get('message', '')}".strip()


def audit_summary(events: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(f"{e['verb']} {e.get('objectRef', {}).get('resource')} "
                        f"{e.get('responseStatus', {}).get('code')}" for e in events))


def refused_writes(events: list[dict[str, Any]]) -> list[str]:
    return [described(e) for e in events if e.get("responseStatus", {}).get("code") == 403]


# The cluster's side.

def node_of(plane: cp.ControlPlane, name: str) -> dict[str, Any]:
    return cp.json_get(plane, f"/api/v1/nodes/{name}")


def taints(plane: cp.ControlPlane, name: str) -> dict[str, str]:
    return {t["key"]: t.get("value", "") for t in node_of(plane, name)["spec"].get("taints") or []}


def create_node(stack: Stack, node: dict[str, Any], leftovers: list[list[str]]) -> str:
    name = node["metadata"]["name"]
    made = kubectl(stack.plane, "create", "-f", "-", stdin=json.dumps(node))
    assert made.returncode == 0, made.stderr
    leftovers.append(["node", name])
    cp.wait_until(lambda: ha.ready(node_of(stack.plane, name)), 180, f"kwok reports {name} Ready", stack.kwok)
    return name


def untaint(plane: cp.ControlPlane, name: str, key: str) -> None:
    """As the admin: the node as it is once its first check passed."""
    kept = [t for t in node_of(plane, name)["spec"].get("taints") or [] if t["key"] != key]
    done = kubectl(plane, "patch", "node", name, "--type=merge", "-p", json.dumps({"spec": {"taints": kept}}))
    assert done.returncode == 0, done.stderr


def pods_on(plane: cp.ControlPlane, namespace: str, node: str, app: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"labelSelector": f"{APP_LABEL}={app}", "fieldSelector": f"spec.nodeName={node}"})
    return [p for p in cp.json_get(plane, f"/api/v1/namespaces/{namespace}/pods?{query}")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def agent_pod(stack: Stack, namespace: str, node: str, app: str) -> dict[str, Any]:
    cp.wait_until(lambda: bool(pods_on(stack.plane, namespace, node, app)), 180, f"{app}'s pod on {node}")
    return pods_on(stack.plane, namespace, node, app)[0]


@pytest.fixture
def leftovers(dev_stack: Stack) -> Iterator[list[list[str]]]:
    """kubectl delete arguments of what a scenario made, deleted after it, last made first."""
    made: list[list[str]] = []
    yield made
    for args in reversed(made):
        kubectl(dev_stack.plane, "delete", *args, "--ignore-not-found", "--wait=false")


def health_daemons(stack: Stack) -> tuple[Daemon, Daemon, Daemon]:
    """dev's t4 health DaemonSet (its gate and agent containers) and its t4 recheck CronJob."""
    health = daemons(stack.out, "health_agent.py")
    on_t4 = [d for d in health if d.workload["kind"] == "DaemonSet" and d.pod["nodeSelector"].get(LABEL_POOL) == "t4"]
    gate = next(d for d in on_t4 if d.args == ["gate"])
    agent = next(d for d in on_t4 if d.args == ["agent"])
    recheck = next(d for d in health if d.workload["kind"] == "CronJob" and d.args[:2] == ["recheck", "t4"])
    return gate, agent, recheck


def own_pool(stack: Stack, agent: Daemon, pool: str, index: int, leftovers: list[list[str]]) -> tuple[str, str]:
    """A node of dev's first t4 scale set in a pool of its own, with dev's t4 health DaemonSet copied onto that pool
    (the real DaemonSet controller gives the node its agent pod, kwok runs it). The recheck picks at random among its
    pool's idle nodes: in a pool of its own it can only take this node, whatever dev's t4 nodes are doing."""
    app = f"gpu-health-{pool}"
    daemon_set = copy.deepcopy(agent.workload)
    daemon_set["metadata"]["name"] = app
    template = daemon_set["spec"]["template"]
    for labels in (daemon_set["metadata"]["labels"], daemon_set["spec"]["selector"]["matchLabels"],
                   template["metadata"]["labels"]):
        labels[APP_LABEL] = app
    for labels in (daemon_set["metadata"]["labels"], template["metadata"]["labels"], template["spec"]["nodeSelector"]):
        labels[LABEL_POOL] = pool
    result = Applied()
    apply_objects(stack.plane, [daemon_set], result, "e2e")
    assert not result.refused, result.refused
    leftovers.append(["daemonset", app, "-n", agent.namespace])
    node = next(t for t in templates("dev", stack.out) if t.pool == "t4").node(index)
    node["metadata"]["labels"][LABEL_POOL] = pool
    return create_node(stack, node, leftovers), app


def run_agent_until(name: str, env: dict[str, str], log: Path, what: str, done: Callable[[], bool],
                    seconds: float = 120) -> str:
    """`health_agent.py agent` (the DaemonSet's main container) until `done()`; its log."""
    program = start_script(name, "health_agent.py", ["agent"], env, log)
    try:
        cp.wait_until(done, seconds, what, program)
    finally:
        program.stop()
    return log.read_text()


# The GPU health agent (dev: DaemonSet gpu-health-<pool>, CronJob gpu-recheck-<pool>).

def test_the_health_agent_clears_its_node_and_taints_it_on_a_dcgm_failure(dev_stack: Stack, report: E2EReport,
                                                                         leftovers: list[list[str]], tmp_path: Path) -> None:
    """The gate (init container) finds the preflight taint; the agent removes it on a passing diagnostic and taints the
    node unhealthy when DCGM's health watch reports a failure. Its token is bound to its pod, as the kubelet's is; the
    same run with a token bound to no pod is refused by dev's node policy (the agent may change only its own node)."""
    plane = dev_stack.plane
    gate, agent, _ = health_daemons(dev_stack)
    rbac = dev_rendered_and_applied(dev_stack, agent)
    node, app = own_pool(dev_stack, agent, "e2e-agent", 990001, leftovers)
    pod = agent_pod(dev_stack, agent.namespace, node, app)["metadata"]["name"]
    shared = tmp_path / "shared"
    shared.mkdir()
    bound = account_dir(plane, agent.namespace, agent.account, tmp_path / "bound", pod=pod)
    env = environment(plane, bound, NODE_NAME=node, SHARED_DIR=str(shared), HEALTH_WATCH_SECONDS="1")

    gated = run_script("health_agent.py", gate.args, env)
    assert gated.returncode == 0, gated.stderr
    assert (shared / "run-diag").read_text() == "yes", gated.stdout
    # What the diagnostics init container leaves (`dcgmi diag -j > diag.json; echo $? > diag.exit`), DCGM-shaped.
    (shared / "diag.exit").write_text("0\n")
    (shared / "diag.json").write_text(json.dumps(PASSING_DIAG))

    # Not bound to a pod: the server adds no node to the user, and the policy refuses the patch.
    before = len(audited(plane, agent.namespace, agent.account))
    unbound = account_dir(plane, agent.namespace, agent.account, tmp_path / "unbound")
    unbound_log = run_agent_until("health-agent (unbound token)", {**env, "KUBE_SA_DIR": str(unbound)},
                                  tmp_path / "agent-unbound.log", "the unbound agent's refused round",
                                  lambda: f"{node}: ApiError" in (tmp_path / "agent-unbound.log").read_text())
    unbound_events = audited(plane, agent.namespace, agent.account)[before:]
    denied = [described(e) for e in unbound_events if e.get("responseStatus", {}).get("code") != 200]
    assert ha.PREFLIGHT in taints(plane, node)
    assert any("may change only the node it runs on" in d for d in denied), (denied, unbound_log)

    before = len(audited(plane, agent.namespace, agent.account))
    agent_log = run_agent_until("health-agent", env, tmp_path / "agent.log", "the preflight taint removed",
                                lambda: ha.PREFLIGHT not in taints(plane, node))
    cleared = taints(plane, node)
    (shared / "health.tmp").write_text(json.dumps(FAILING_HEALTH))
    (shared / "health.tmp").rename(shared / "health.json")  # as the health-watch container writes it
    agent_log += run_agent_until("health-agent (watch)", env, tmp_path / "agent-watch.log", "the unhealthy taint",
                                 lambda: taints(plane, node).get(ha.UNHEALTHY) == "failure")
    events = audited(plane, agent.namespace, agent.account)[before:]
    extra = {tuple(e["user"].get("extra", {}).get(NODE_NAME_EXTRA, [])) for e in events}
    # The unbound run is refused by admission (its status is recorded), never by RBAC.
    refused = refusals(gated.stdout + gated.stderr + unbound_log + agent_log) + refused_writes(unbound_events + events)
    report.scenario("health agent (gate, agent) as gpu-health-agent against the real API server",
                    "failed" if refused else "passed", rbac=rbac, node=node, gate=gated.stdout.strip(),
                    after_diagnostics=cleared, after_health_watch=taints(plane, node),
                    agent_log=agent_log.strip().splitlines(), writes=audit_summary(events), node_in_token=sorted(extra),
                    unbound_token_refused=denied, refused=refused)
    assert not refused
    assert ha.PREFLIGHT not in cleared and ha.UNHEALTHY not in cleared, cleared
    assert extra == {(node,)}, extra


def test_the_recheck_takes_an_idle_node_back_into_the_checks(dev_stack: Stack, report: E2EReport,
                                                            leftovers: list[list[str]], tmp_path: Path) -> None:
    """The CronJob's `recheck <pool> <limit> <namespace> <app>`: an idle node in service gets the preflight taint back
    and its agent pod deleted; the DaemonSet controller makes a new one, whose gate then runs the diagnostics."""
    plane = dev_stack.plane
    gate, agent, recheck = health_daemons(dev_stack)
    rbac = dev_rendered_and_applied(dev_stack, recheck)
    pool = "e2e-recheck"
    node, app = own_pool(dev_stack, agent, pool, 990011, leftovers)
    old = agent_pod(dev_stack, agent.namespace, node, app)
    untaint(plane, node, ha.PREFLIGHT)

    account = account_dir(plane, recheck.namespace, recheck.account, tmp_path / "recheck")
    args = [recheck.args[0], pool, recheck.args[2], recheck.args[3], app]
    done = run_script("health_agent.py", args, environment(plane, account))
    after = taints(plane, node)
    cp.wait_until(lambda: any(p["metadata"]["uid"] != old["metadata"]["uid"]
                              for p in pods_on(plane, agent.namespace, node, app)), 180, f"{app}'s new pod on {node}")
    new = pods_on(plane, agent.namespace, node, app)[0]
    shared = tmp_path / "shared"
    shared.mkdir()
    bound = account_dir(plane, agent.namespace, agent.account, tmp_path / "bound", pod=new["metadata"]["name"])
    gated = run_script("health_agent.py", gate.args, environment(plane, bound, NODE_NAME=node, SHARED_DIR=str(shared)))
    events = audited(plane, recheck.namespace, recheck.account)
    refused = refusals(done.stdout + done.stderr + gated.stdout + gated.stderr) + refused_writes(events)
    report.scenario("health recheck as gpu-health-recheck against the real API server",
                    "passed" if done.returncode == 0 and not refused else "failed", rbac=rbac, args=args,
                    exit=done.returncode, output=(done.stdout + done.stderr).strip(), taints_after=after,
                    old_pod=old["metadata"]["name"], new_pod=new["metadata"]["name"], new_gate=gated.stdout.strip(),
                    writes=audit_summary(events), refused=refused)
    assert done.returncode == 0, done.stderr
    assert not refused
    assert after.get(ha.PREFLIGHT) == "recheck", after
    assert f"{node}: idle, active checks scheduled again" in done.stdout
    assert gated.returncode == 0 and (shared / "run-diag").read_text() == "yes", gated.stderr


# The rollout controller (dev: Deployment gpucluster-rollout).

def _configmap(plane: cp.ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    code, body = plane.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    return json.loads(body) if code == 200 else None


def _state(plane: cp.ControlPlane, namespace: str) -> dict[str, Any]:
    found = _configmap(plane, namespace, ro.STATE_CONFIGMAP)
    return json.loads(found["data"]["state.json"]) if found else {}


def _lease(plane: cp.ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    code, body = plane.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    return json.loads(body)["spec"] if code == 200 else {}


def _lease_holder(plane: cp.ControlPlane, namespace: str, name: str) -> str | None:
    return _lease(plane, namespace, name).get("holderIdentity")


def _renewed(plane: cp.ControlPlane, namespace: str, name: str) -> bool:
    """Whether the Lease was renewed (a PUT with the resourceVersion read) since it was taken."""
    spec = _lease(plane, namespace, name)
    return bool(spec) and spec.get("renewTime") != spec.get("acquireTime")


def _reboot(plane: cp.ControlPlane, name: str) -> None:
    """What a re-imaged machine's kubelet does when it comes back: a new Ready transition (kwok keeps a node Ready
    throughout; its heartbeat rewrites the transition only every ten minutes)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                         "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                                         "lastTransitionTime": now}]}}
    done = kubectl(plane, "patch", "node", name, "--subresource=status", "--type=strategic", "-p", json.dumps(status))
    assert done.returncode == 0, done.stderr


def test_the_rollout_controller_rolls_a_wave_on_the_real_server(dev_stack: Stack, report: E2EReport,
                                                                leftovers: list[list[str]], tmp_path: Path) -> None:
    """Two replicas of the controller; the one holding the Lease rolls the one instance of dev's first t4 scale set
    that the fake ARM says is behind its model: fence (the admission label, a cordon: t4's flavor has no topology),
    the checkpoint annotation on a running pod, its eviction through the Eviction API (the wave's drain deadline set
    to 0 here), the preflight taint, ARM's manual upgrade (the model names a new image: no reimage). Then the leader
    stops mid-wave: the other replica takes the Lease and finishes the wave from the state (the node back, a new
    Ready transition, the health agent clearing it, the fence lifted) without asking ARM again. Every write as
    gpucluster-rollout with its rendered roles, checked for 403 in the audit log."""
    plane = dev_stack.plane
    daemon = daemons(dev_stack.out, "rollout.py")[0]
    namespace = daemon.namespace
    rbac = dev_rendered_and_applied(dev_stack, daemon)
    _, agent, _ = health_daemons(dev_stack)
    t4 = next(t for t in templates("dev", dev_stack.out) if t.pool == "t4")
    plan_map = _configmap(plane, namespace, ro.PLAN_CONFIGMAP)
    assert plan_map is not None
    plan = json.loads(plan_map["data"]["plan.json"])
    wave = next(w for w in plan["waves"] if w["kind"] == "pool" and t4.scale_set in w["scaleSets"])
    assert wave["topology"] is False and wave["preflight"] is True
    wave["drainMinutes"] = 0
    quick = kubectl(plane, "create", "configmap", ro.PLAN_CONFIGMAP, "-n", namespace, "--dry-run=client", "-o", "json",
                    f"--from-literal=plan.json={json.dumps(plan)}")
    assert quick.returncode == 0, quick.stderr
    replaced = kubectl(plane, "replace", "-f", "-", stdin=quick.stdout)
    assert replaced.returncode == 0, replaced.stderr

    index = 990021
    node = t4.node(index)
    node["spec"]["providerID"] = rollout_world.PROVIDER.format(t4.scale_set, index)  # ARM's name for the VM
    name = create_node(dev_stack, node, leftovers)
    untaint(plane, name, ro.PREFLIGHT)  # in service: its first check passed
    # A pod outside Kueue on the wave's node, which leaves by eviction: a platform one (a balloon's namespace), since
    # Kueue's pod integration gates every team pod, and a gated pod cannot name its node.
    job = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rollout-e2e-job", "namespace": BALLOONS},
           "spec": {"nodeName": name, "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "train", "image": "registry.k8s.io/pause:3.10.1"}]}}
    made = kubectl(plane, "create", "-f", "-", stdin=json.dumps(job))
    assert made.returncode == 0, made.stderr
    leftovers.append(["pod", "rollout-e2e-job", "-n", BALLOONS])
    for kind, object_name in (("configmap", ro.STATE_CONFIGMAP), ("lease", ro.LEASE)):
        kubectl(plane, "delete", kind, object_name, "-n", namespace, "--ignore-not-found")
        leftovers.append([kind, object_name, "-n", namespace])

    account = account_dir(plane, namespace, daemon.account, tmp_path / "rollout")
    arm = rollout_world.Arm()
    image = rollout_world.IMAGE.format("t4", "1.0.0")
    arm.sets[t4.scale_set] = rollout_world.ScaleSet(image, {str(index): rollout_world.Vm(image)})
    arm.bump(t4.scale_set, "1.0.1")
    arm.done = lambda scale_set, instance: _reboot(plane, name)
    with arm.running():
        # The fake ARM answers for subscription `sub`, group `rg`; the rest of the environment is the Deployment's.
        env = environment(plane, account, daemon.env, AZURE_SUBSCRIPTION_ID="sub", AZURE_RESOURCE_GROUP="rg",
                          ARM_ENDPOINT=arm.url,
                          IMDS_TOKEN_ENDPOINT=f"{arm.url}/metadata/identity/oauth2/token", ROLLOUT_INTERVAL_SECONDS="1")
        first = start_script("rollout-a", "rollout.py", daemon.args, {**env, "POD_NAME": "gpucluster-rollout-a"},
                             tmp_path / "rollout-a.log")
        second: Program | None = None
        try:
            cp.wait_until(lambda: _lease_holder(plane, namespace, ro.LEASE) == "gpucluster-rollout-a", 60,
                          "replica a holds the Lease", first)
            second = start_script("rollout-b", "rollout.py", daemon.args, {**env, "POD_NAME": "gpucluster-rollout-b"},
                                  tmp_path / "rollout-b.log")
            cp.wait_until(lambda: _state(plane, namespace).get("phase") == "health", 240, "the wave moved", first)
            rolled = node_of(plane, name)
            evicted = cp.json_get(plane, f"/api/v1/pods?fieldSelector=spec.nodeName%3D{name}")["items"]
            first.stop()  # the leader goes mid-wave
            cp.wait_until(lambda: _lease_holder(plane, namespace, ro.LEASE) == "gpucluster-rollout-b", 120,
                          "replica b takes the Lease", second)

            # The health agent of the node's pod (dev's t4 DaemonSet) clears the re-imaged node.
            pod = agent_pod(dev_stack, agent.namespace, name, agent.workload["metadata"]["name"])
            shared = tmp_path / "shared"
            shared.mkdir()
            bound = account_dir(plane, agent.namespace, agent.account, tmp_path / "agent", pod=pod["metadata"]["name"])
            agent_env = environment(plane, bound, NODE_NAME=name, SHARED_DIR=str(shared), HEALTH_WATCH_SECONDS="1")
            gated = run_script("health_agent.py", ["gate"], agent_env)
            assert gated.returncode == 0 and (shared / "run-diag").read_text() == "yes", gated.stderr
            (shared / "diag.exit").write_text("0\n")
            (shared / "diag.json").write_text(json.dumps(PASSING_DIAG))
            agent_log = run_agent_until("health-agent", agent_env, tmp_path / "agent.log", "the preflight taint removed",
                                        lambda: ro.PREFLIGHT not in taints(plane, name))
            cp.wait_until(lambda: _state(plane, namespace) == {"phase": "scan"} and FENCE.open == node_of(
                plane, name)["metadata"]["labels"].get(FENCE.label), 120, "the fence lifted", second)
            cp.wait_until(lambda: _renewed(plane, namespace, ro.LEASE), 60, "the Lease renewed", second)
            lease = _lease(plane, namespace, ro.LEASE)
        finally:
            first.stop()
            if second is not None:
                second.stop()
            restored = kubectl(plane, "replace", "-f", "-", stdin=json.dumps(
                {k: v for k, v in plan_map.items() if k != "metadata"} | {"metadata": {
                    "name": ro.PLAN_CONFIGMAP, "namespace": namespace}}))
            assert restored.returncode == 0, restored.stderr
    after = node_of(plane, name)
    log_a, log_b = (tmp_path / "rollout-a.log").read_text(), (tmp_path / "rollout-b.log").read_text()
    steps = [line.removeprefix("rollout: ") for line in log_a.splitlines() if line.startswith("rollout: ")]
    taken_over = [line.removeprefix("rollout: ") for line in log_b.splitlines() if line.startswith("rollout: ")]
    events = audited(plane, namespace, daemon.account)
    refused = (refusals(log_a + log_b + gated.stdout + gated.stderr + agent_log) + refused_writes(events)
               + refused_writes(audited(plane, agent.namespace, agent.account)))
    report.scenario("rollout controller (two replicas) as gpucluster-rollout against the real API server",
                    "failed" if refused else "passed", rbac=rbac, wave=wave["index"], node=name, steps=steps,
                    lease=lease, other_replica=taken_over,
                    fenced=rolled["metadata"]["labels"].get(FENCE.label), cordoned=rolled["spec"].get("unschedulable"),
                    taints_moved=taints_of(rolled), pods_left=[p["metadata"]["name"] for p in evicted],
                    arm_posts=arm.posts, lifted=after["metadata"]["labels"].get(FENCE.label),
                    writes=audit_summary(events), refused=refused)
    assert not refused
    assert rolled["metadata"]["labels"].get(FENCE.label) == FENCE.fenced and rolled["spec"].get("unschedulable")
    assert taints_of(rolled).get(ro.PREFLIGHT) == "rollout"
    assert "rollout-e2e-job" not in [p["metadata"]["name"] for p in evicted], "evicted before the move"
    assert any(e.get("objectRef", {}).get("subresource") == "eviction" for e in events), "through the Eviction API"
    assert arm.posts == [(t4.scale_set, "manualupgrade", (str(index),))], arm.posts
    assert after["metadata"]["labels"].get(FENCE.label) == FENCE.open and not after["spec"].get("unschedulable")
    assert taken_over[0] == "not the leader" and any(s.endswith("fence lifted") for s in taken_over), taken_over
    assert lease["holderIdentity"] == "gpucluster-rollout-b", lease
    assert any(s.endswith("instances to upgrade, 0 then to re-image") for s in steps), steps


def taints_of(node: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t.get("value", "") for t in node["spec"].get("taints") or []}


# The prefix IPAM controller (prod: Deployment gpucluster-prefix-ipam).

@pytest.fixture(scope="module")
def prod_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plan_stack("prod", tmp_path_factory.mktemp("plan") / "prod")


@pytest.fixture(scope="module")
def gb300_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plan_stack("gb300", tmp_path_factory.mktemp("plan") / "gb300")


def test_the_prefix_ipam_controller_leads_and_follows_the_nodes(dev_stack: Stack, prod_out: Path, report: E2EReport,
                                                               foreign_account: ApplyAccount, leftovers: list[list[str]],
                                                               tmp_path: Path) -> None:
    """prod renders the controller (its pods take their addresses from /28 blocks); here with prod's account and roles
    on dev's control plane: it takes its Lease, lists the nodes and follows them by watch (a node added later has its
    scale set's NICs read from the fake ARM). The CiliumNode half is not exercised: the CRD is Cilium's, registered by
    the Cilium operator at runtime, and no Cilium runs here; the real server's answer to its list is recorded."""
    plane = dev_stack.plane
    daemon = daemons(prod_out, "prefix_ipam.py")[0]
    rbac = foreign_account(prod_out, daemon)
    gpu = [t for t in templates("prod", prod_out) if t.capacity.get("nvidia.com/gpu")][:2]
    azure = FakeAzure()

    def node(template: NodeTemplate, index: int) -> dict[str, Any]:
        made = template.node(index)
        made["spec"]["providerID"] = ipam_world.provider_id(template.scale_set, index)
        azure.nics[template.scale_set.lower()] = [(index, [ipam_world.block(index % 100)])]
        return made

    def listed(template: NodeTemplate) -> bool:
        return bool(azure.requests("GET", f"/virtualMachineScaleSets/{template.scale_set}/networkInterfaces$"))

    kubectl(plane, "delete", "lease", daemon.args[1], "-n", daemon.args[0], "--ignore-not-found")
    leftovers.append(["lease", daemon.args[1], "-n", daemon.args[0]])
    create_node(dev_stack, node(gpu[0], 990041), leftovers)
    account = account_dir(plane, daemon.namespace, daemon.account, tmp_path / "ipam")
    log = tmp_path / "prefix-ipam.log"
    with azure.running():
        env = environment(plane, account, daemon.env, POD_NAME="gpucluster-prefix-ipam-e2e",
                          ARM_ENDPOINT=azure.url, IMDS_TOKEN_ENDPOINT=f"{azure.url}/metadata/identity/oauth2/token",
                          PREFIX_IPAM_SYNC_SECONDS="1", PREFIX_IPAM_BACKOFF_CAP="2")
        program = start_script("prefix-ipam", "prefix_ipam.py", daemon.args, env, log)
        try:
            cp.wait_until(lambda: _lease_holder(plane, daemon.args[0], daemon.args[1]) == "gpucluster-prefix-ipam-e2e", 60,
                          "the controller holds its Lease", program)
            cp.wait_until(lambda: listed(gpu[0]), 60, f"{gpu[0].scale_set}'s NICs read", program)
            cp.wait_until(lambda: "ciliumnodes" in log.read_text(), 60, "the CiliumNode list answered", program)
            create_node(dev_stack, node(gpu[1], 990042), leftovers)
            cp.wait_until(lambda: listed(gpu[1]), 60, f"{gpu[1].scale_set}'s NICs read after its node joined", program)
            cp.wait_until(lambda: _renewed(plane, daemon.args[0], daemon.args[1]), 60, "the Lease renewed", program)
        finally:
            program.stop()
    text = log.read_text()
    cilium = sorted({line for line in text.splitlines() if "ciliumnodes" in line})
    others = sorted({line for line in text.splitlines() if line.strip() and "ciliumnodes" not in line})
    code, body = plane.get("/apis/cilium.io/v2/ciliumnodes")
    events = audited(plane, daemon.namespace, daemon.account)
    refused = refusals(text) + refused_writes(events)
    report.scenario("prefix IPAM controller as gpucluster-prefix-ipam (prod's roles) against the real API server",
                    "failed" if refused else "passed", rbac=rbac, lease=_lease(plane, daemon.args[0], daemon.args[1]),
                    nodes_followed=[t.scale_set for t in gpu],
                    relisted="listing again" in text, writes=audit_summary(events), refused=refused,
                    not_exercised="CiliumNode list/watch/patch: the CiliumNode CRD is registered by Cilium at runtime "
                                  "and make e2e runs no Cilium; every round stops at that list, after the nodes and NICs",
                    ciliumnodes_answer=f"{code} {body.strip()[:120]}", ciliumnodes_log=cilium, other_log=others)
    assert not refused
    assert "listing again" not in text  # the second node came by the watch, not by a new list
    assert code == 404 and cilium and all(" 404: GET " in line for line in cilium), cilium


# The rack clique check (gb300: CronJob gpucluster-rack-clique).

def test_the_rack_clique_check_taints_a_stray_node_and_lifts_it(dev_stack: Stack, gb300_out: Path, report: E2EReport,
                                                               foreign_account: ApplyAccount, leftovers: list[list[str]],
                                                               tmp_path: Path) -> None:
    """gb300's check with gb300's account, roles and node policy on dev's control plane, over nodes of two gb300
    racks as GPU feature discovery labels them: the one node whose NVLink clique is not its rack's is tainted; once
    its clique agrees, the next run lifts the taint."""
    plane = dev_stack.plane
    daemon = daemons(gb300_out, "rack_clique.py")[0]
    rbac = foreign_account(gb300_out, daemon)
    racks = [t for t in templates("gb300", gb300_out) if t.labels.get(rc.RACK)][:2]
    fabric = "4b8f0c4e-2d7a-4c55-9d0e-6f1b2a3c4d5e"
    cliques = [(racks[0], f"{fabric}.1"), (racks[0], f"{fabric}.1"), (racks[0], f"{fabric}.2"), (racks[1], f"{fabric}.3")]
    names = []
    for n, (template, clique) in enumerate(cliques):
        node = template.node(990051 + n)
        node["metadata"]["labels"][rc.CLIQUE] = clique
        names.append(create_node(dev_stack, node, leftovers))
    stray = names[2]
    account = account_dir(plane, daemon.namespace, daemon.account, tmp_path / "rack-clique")
    env = environment(plane, account)

    first = run_script("rack_clique.py", daemon.args, env)
    after_first = {n: taints(plane, n).get(rc.UNPROVEN) for n in names}
    relabelled = kubectl(plane, "label", "node", stray, f"{rc.CLIQUE}={fabric}.1", "--overwrite")
    assert relabelled.returncode == 0, relabelled.stderr
    second = run_script("rack_clique.py", daemon.args, env)
    after_second = {n: taints(plane, n).get(rc.UNPROVEN) for n in names}
    events = audited(plane, daemon.namespace, daemon.account)
    refused = refusals(first.stdout + first.stderr + second.stdout + second.stderr) + refused_writes(events)
    report.scenario("rack clique check as rack-clique (gb300's roles and node policy) against the real API server",
                    "passed" if first.returncode == second.returncode == 0 and not refused else "failed", rbac=rbac,
                    args=daemon.args, first=(first.stdout + first.stderr).strip(), after_first=after_first,
                    second=(second.stdout + second.stderr).strip(), after_second=after_second,
                    writes=audit_summary(events), refused=refused)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert not refused
    assert after_first == {n: ("clique" if n == stray else None) for n in names}, after_first
    assert after_second == dict.fromkeys(names), after_second
