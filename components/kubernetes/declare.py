"""Declare a Kubernetes object given as a plain dict, with the typed pulumi-kubernetes class for its kind."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.kubernetes.objects.common import Object

_TYPED: dict[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("batch/v1", "CronJob"): k8s.batch.v1.CronJob,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("scheduling.k8s.io/v1", "PriorityClass"): k8s.scheduling.v1.PriorityClass,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): k8s.apiextensions.v1.CustomResourceDefinition,
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema"): k8s.flowcontrol.v1.FlowSchema,
    ("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"): k8s.flowcontrol.v1.PriorityLevelConfiguration,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def resource_name(o: Object) -> str:
    meta = o["metadata"]
    parts = [o["kind"].lower(), meta.get("namespace"), meta["name"]]
    return "-".join(p for p in parts if p).replace(":", "-")


def declare(o: Object, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Top-level fields become keyword arguments; nested fields keep their Kubernetes (camelCase) names."""
    body = {_snake(k): v for k, v in o.items() if k not in ("apiVersion", "kind")}
    typed = _TYPED.get((o["apiVersion"], o["kind"]))
    if typed is not None:
        return typed(resource_name(o), opts=opts, **body)
    return k8s.apiextensions.CustomResource(resource_name(o), api_version=o["apiVersion"], kind=o["kind"],
                                            opts=opts, **body)


def declare_all(objects: list[Object], opts: pulumi.ResourceOptions) -> list[pulumi.CustomResource]:
    return [declare(o, opts) for o in objects]




PREREQUISITE_KINDS = ("Namespace", "ServiceAccount")
"""What admission needs before the objects that use them (a namespace before anything in it, a service account
before the pods that run as it); priority classes are declared before the whole layer (in_cluster.py)."""


def declare_staged(objects: list[Object], opts: pulumi.ResourceOptions,
                   after: Sequence[pulumi.Resource] = ()) -> list[pulumi.CustomResource]:
    """Namespaces, then service accounts after their namespace, with `opts` alone (never behind a gate); everything
    else after `after`, its own namespace and the service accounts in it. Each object waits for its own namespace
    only, so a layer of n team namespaces records n dependencies per namespace, not n x n (500 teams made dev's
    preview 100 MB). Returned in the objects' order."""
    namespaces = {o["metadata"]["name"]: declare(o, opts) for o in objects if o["kind"] == "Namespace"}

    def in_namespace(o: Object) -> list[pulumi.Resource]:
        own = namespaces.get(o["metadata"].get("namespace") or "")
        return [own] if own is not None else []

    accounts: dict[int, pulumi.CustomResource] = {}
    by_namespace: dict[str, list[pulumi.Resource]] = {}
    for o in objects:
        if o["kind"] == "ServiceAccount":
            account = declare(o, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=in_namespace(o))))
            accounts[id(o)] = account
            by_namespace.setdefault(o["metadata"].get("namespace") or "", []).append(account)

    def rest(o: Object) -> pulumi.CustomResource:
        namespace = o["metadata"].get("namespace") or ""
        needs = [*after, *in_namespace(o), *(by_namespace.get(namespace, []) if namespace else [])]
        return declare(o, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=needs)))

    namespace_ids = {id(o): namespaces[o["metadata"]["name"]] for o in objects if o["kind"] == "Namespace"}
    declared = {**namespace_ids, **accounts}
    return [declared[id(o)] if id(o) in declared else rest(o) for o in objects]
