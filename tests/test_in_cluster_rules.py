"""In-cluster rules from the consumers' source at the pinned versions (issue 18 items), each a test that
fails without its fix."""

from __future__ import annotations

import yaml

from gpucluster.bootstrap.apiserver import BOOT_SCRIPT as API_BOOT
from gpucluster.bootstrap.node import BOOT_SCRIPT as NODE_BOOT
from gpucluster.bootstrap.node import NodeBootstrap, kubelet_patch
from gpucluster.kubernetes.objects.autoscaler import autoscaler_args
from gpucluster.kubernetes.objects.charts import gpu_operator_values
from gpucluster.kubernetes.objects.dns import COREFILE
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.offline.manifests import helm_releases
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.node_template import registers_preflight
from gpucluster.planning.pki import api_server_host
from gpucluster.vocabulary import TAINT_PREFLIGHT, TAINT_UNHEALTHY
from tests.support.stacks import stack_spec


def test_corefile_blocks_open_and_close_on_their_own_lines() -> None:
    """coredns/caddy caddyfile/dispenser.go: a block's `{` ends its line and `}` stands alone; on one line
    `health { lameduck 5s }` makes `}` a second argument ('Wrong argument count or unexpected line ending')."""
    for line in COREFILE.splitlines():
        tokens = line.split()
        if "{" in tokens:
            assert tokens[-1] == "{", line
        if "}" in tokens:
            assert tokens == ["}"], line


def test_only_pools_whose_checks_remove_it_register_the_preflight_taint() -> None:
    """kubelet registerWithTaints applies at registration; only the GPU health DaemonSets remove the
    preflight taint, so any other pool carrying it would never take a pod that does not tolerate it."""
    plan = plan_cluster(stack_spec("prod"))
    for pool in plan.pools:
        assert registers_preflight(pool) == (pool.size.gpus > 0)
    for pool in plan.pools:
        node = plan.boot.node(pool.scale_sets[0].name)
        bootstrap = NodeBootstrap("1.36.4", "10.0.0.4:6443", "abcdef.0123456789abcdef", "sha256:" + "0" * 64, 30,
                                  "10.96.0.10", taints=node.taints)
        keys = [t["key"] for t in kubelet_patch(bootstrap)["registerWithTaints"]]  # type: ignore[union-attr]
        assert (TAINT_PREFLIGHT in keys) == (pool.size.gpus > 0), pool.name


def test_gpu_operator_values_reach_what_the_chart_reads() -> None:
    """gpu-operator v26.3.3: NFD is a subchart with its own `node-feature-discovery.worker.tolerations`
    (values.yaml: control-plane and nvidia.com/gpu only); `daemonsets.tolerations` is read by
    templates/clusterpolicy.yaml for the operands only; no template reads `operator.defaultRuntime`."""
    values = gpu_operator_values()
    assert values["node-feature-discovery"]["worker"]["tolerations"] == [{"operator": "Exists"}]
    assert "defaultRuntime" not in values["operator"]
    # templates/clusterpolicy.yaml `cdi.enabled: {{ .Values.cdi.enabled }}`: with CDI on the toolkit never makes
    # `nvidia` containerd's default runtime (controllers/object_controls.go transformToolkitCtrForCDI); its pods
    # reach it by the operator's RuntimeClass (values.yaml `operator.runtimeClass: nvidia`).
    assert values["cdi"] == {"enabled": True}
    assert not any(e["name"] in ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "CONTAINERD_SET_AS_DEFAULT")
                   for e in gpu_operator_values(racks=True)["toolkit"].get("env", []))


def test_autoscaler_flags_follow_its_source() -> None:
    """cluster-autoscaler 1.36.1 config/flags/flags.go: --startup-taint (ignored in templates while the node
    starts, the node counted as not ready yet), --status-taint (ignored in templates, the node NOT treated as
    unready: a node the health agent tainted gpu-unhealthy), --max-nodes-total over all nodes; the Lease name is
    component-base's --leader-elect-resource-name, bound in main.go (default "cluster-autoscaler"). Balancing
    (processors/nodegroupset/compare_nodegroups.go): groups whose labels differ outside BasicIgnoredLabels (hostname
    and zone labels) and --balancing-ignore-label are not similar, so the InfiniBand domain label must NOT be ignored,
    or one gang's scale-up is split across domains."""
    args = autoscaler_args("prod", 7500, 0.01, control_plane_nodes=5)
    assert f"--startup-taint={TAINT_PREFLIGHT}" in args
    assert "--status-taint=gpucluster.io/gpu-unhealthy" in args
    assert not [a for a in args if a.startswith("--balancing-ignore-label") and "infiniband-domain" in a]
    assert not [a for a in args if a.startswith("--balancing-label")]  # it would replace the comparison wholesale
    assert "--balance-similar-node-groups=true" in args and "--max-nodes-total=7505" in args
    assert "--leader-elect-resource-name=cluster-autoscaler" in args


def test_the_autoscaler_updates_only_its_own_lease() -> None:
    """RBAC resourceNames limit get/update to the Lease the autoscaler's leader election names; `create` cannot be
    limited by name (kubernetes.io/docs/reference/access-authn-authz/rbac, "Referring to resources")."""
    from gpucluster.kubernetes.objects.autoscaler import LEASE, autoscaler_objects
    objects = autoscaler_objects("prod", 7500, 0.01, {"subscription_id": "s", "tenant_id": "t", "resource_group": "g",
                                                      "client_id": "c"}, "1.36")
    cluster_rules = next(o for o in objects if o["kind"] == "ClusterRole")["rules"]
    assert not [r for r in cluster_rules if "leases" in r["resources"]]
    role = next(o for o in objects if o["kind"] == "Role")
    leases = [r for r in role["rules"] if "leases" in r["resources"]]
    assert role["metadata"]["namespace"] == "kube-system"
    assert leases == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                      {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
                       "verbs": ["get", "update"]}]


def test_our_gpu_product_label_is_not_the_one_feature_discovery_owns() -> None:
    """GPU feature discovery (NVIDIA/k8s-device-plugin internal/lm/resource.go `productLabel`, run by the GPU
    operator) writes `nvidia.com/gpu.product` from the NVML name ("NVIDIA-H100-80GB-HBM3"), overwriting whatever the
    kubelet registered; the autoscaler's scale-from-zero template (our scale-set tags) would then describe a label
    no running node has."""
    from gpucluster.planning.node_template import autoscaler_tags, node_labels
    from gpucluster.vocabulary import LABEL_GPU_PRODUCT
    plan = plan_cluster(stack_spec("prod"))
    gpu = next(p for p in plan.pools if p.size.gpus)
    labels = node_labels(gpu, gpu.scale_sets[0], "eastus")
    assert LABEL_GPU_PRODUCT == "gpucluster.io/gpu-product" and labels[LABEL_GPU_PRODUCT]
    assert not any(k.startswith("nvidia.com/") for k in labels)
    tags = autoscaler_tags("prod", gpu, gpu.scale_sets[0], 0, "eastus")
    assert not any("nvidia.com_gpu.product" in k for k in tags)


def test_health_checks_share_the_operators_host_engine() -> None:
    """gpu-operator v26.3.3: with `dcgm.enabled` the operator runs one nv-hostengine per GPU node behind the
    `nvidia-dcgm` Service (internalTrafficPolicy Local, assets/state-dcgm) and points the exporter at it
    (controllers/object_controls.go DCGM_REMOTE_HOSTENGINE_INFO). A second host engine in the health pod
    would manage the same GPUs twice."""
    from gpucluster.catalog.in_cluster import DCGM_IMAGE
    from gpucluster.kubernetes.objects.health import health_objects

    assert gpu_operator_values()["dcgm"] == {"enabled": True}
    assert DCGM_IMAGE.endswith(":4.5.2-1-ubuntu22.04")  # the chart's dcgm.version
    plan = plan_cluster(stack_spec("dev"))
    daemonsets = [o for o in health_objects(plan.pools, plan.registry.agents_image) if o["kind"] == "DaemonSet"]
    assert daemonsets
    for ds in daemonsets:
        pod = ds["spec"]["template"]["spec"]
        scripts = " ".join(" ".join(c["command"]) for c in [*pod["initContainers"], *pod["containers"]])
        assert "nv-hostengine" not in scripts and "--host nvidia-dcgm.gpu-operator.svc" in scripts


def _leaves(values: object, prefix: str = "") -> list[str]:
    if isinstance(values, dict) and values:
        return [leaf for key, value in values.items() for leaf in _leaves(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def test_every_value_we_set_is_read_by_the_chart() -> None:
    """A value the templates do not read is silently ignored (operator.defaultRuntime in gpu-operator was).
    Each chart's catalogue (components/catalog/facts/consumers/values-<chart>.json, tools/extract_consumer_facts.py)
    lists every `.Values.<path>` its templates read at the pinned tag (`template_reads`)."""
    from gpucluster.catalog.fact_files import load_facts
    from gpucluster.kubernetes.objects.kueue import kueue_chart_values

    for chart, values in (("gpu-operator", gpu_operator_values()), ("kueue", kueue_chart_values(10, "crd"))):
        paths = set(load_facts(f"consumers/values-{chart}.json")["template_reads"])
        for leaf in _leaves(values):
            parts = leaf.split(".")
            assert any(".".join(parts[:n]) in paths for n in range(1, len(parts) + 1)), (chart, leaf)


def test_cilium_reaches_the_api_server_by_name_from_every_node(prod_run) -> None:
    """The Cilium agent (host network, every node including the API servers) dials `k8sServiceHost`. An API
    server cannot reach its own internal load balancer (Azure Load Balancer limitations: a backend flow to its own
    frontend fails), so the host must be the endpoint's name, which the boot documents map to 127.0.0.1 on the API
    servers and to the load balancer elsewhere; kubelet gives host-network pods the node's /etc/hosts
    (kubernetes pkg/kubelet/kubelet_pods.go, `makeHostsMount`)."""
    plan = plan_cluster(stack_spec("prod"))
    [cilium] = [r for r in helm_releases(prod_run.registrations) if r["chart"] == "cilium"]
    host = cilium["values"]["k8sServiceHost"]
    assert host == api_server_host("prod")
    documents = {name: yaml.safe_load(text) for name, text in boot_documents(plan).items()}
    scripts = {name: next(f["content"] for f in d["write_files"] if f["path"] in (API_BOOT, NODE_BOOT))
               for name, d in documents.items() if any(f["path"] in (API_BOOT, NODE_BOOT) for f in d["write_files"])}
    assert f"echo '127.0.0.1 {host}' >> /etc/hosts" in scripts["apiserver.yaml"]
    nodes = [s for n, s in scripts.items() if n != "apiserver.yaml"]
    assert nodes and all(f"echo '{plan.ip.api_server_ip} {host}' >> /etc/hosts" in s for s in nodes)


def test_each_health_account_has_only_its_own_calls() -> None:
    """The agent on every GPU node gets and patches nodes (no pods); a ValidatingAdmissionPolicy limits its patches
    to the node its token was issued on (`authentication.kubernetes.io/node-name` in userInfo.extra,
    ServiceAccountTokenPodNodeInfo GA in 1.32: kubernetes pkg/features/versioned_kube_features.go) and to our two
    taints. The recheck lists nodes and pods (per node by field selector) and deletes pods in its namespace only.
    What the policy's CEL decides is evaluated in tests/test_health_admission.py."""
    from gpucluster.agents import health_agent
    from gpucluster.kubernetes.objects.health import AGENT_ACCOUNT, NAMESPACE, RECHECK_ACCOUNT, health_objects
    from tests.support.manifest_validation import validate_object

    assert health_agent.UNHEALTHY == TAINT_UNHEALTHY and health_agent.PREFLIGHT == TAINT_PREFLIGHT
    plan = plan_cluster(stack_spec("prod"))
    objects = health_objects(plan.pools, plan.registry.agents_image)
    for o in objects:
        validate_object(o)
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert by_name[("ClusterRole", "gpucluster:gpu-health-agent")]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    assert by_name[("ClusterRole", "gpucluster:gpu-health-recheck")]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert by_name[("Role", "gpu-health-recheck")]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]
    subjects = {o["metadata"]["name"]: o["subjects"][0]["name"] for o in objects if o["kind"].endswith("Binding")
                and o["kind"] != "ValidatingAdmissionPolicyBinding"}
    assert subjects == {"gpucluster:gpu-health-agent": AGENT_ACCOUNT, "gpucluster:gpu-health-recheck": RECHECK_ACCOUNT,
                        "gpu-health-recheck": RECHECK_ACCOUNT}
    for o in objects:
        if o["kind"] == "DaemonSet":
            assert o["spec"]["template"]["spec"]["serviceAccountName"] == AGENT_ACCOUNT
        if o["kind"] == "CronJob":
            assert o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == RECHECK_ACCOUNT
    [policy] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    [binding] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["nodes"]
    agent_user = f"system:serviceaccount:{NAMESPACE}:{AGENT_ACCOUNT}"
    own_node = policy["spec"]["validations"][0]["expression"]
    assert agent_user in own_node and "request.userInfo.extra['authentication.kubernetes.io/node-name'] == " \
        "[object.metadata.name]" in own_node
    assert tuple(int(x) for x in plan.versions.minor.split(".")) >= (1, 32)
