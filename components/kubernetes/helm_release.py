"""A Helm release declared the way its chart's readiness allows (objects/releases.py); every chart the cluster
installs goes through `release`."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.kubernetes.objects.releases import ReleaseOptions


def release(name: str, options: ReleaseOptions, chart: str, version: str, namespace: str, values: dict[str, object],
            opts: pulumi.ResourceOptions, repo: str | None = None) -> k8s.helm.v3.Release:
    """A Helm release installed as `options` says (objects/releases.py): never atomic, waiting only where the
    chart's readiness rule can be met at the cluster's size."""
    return k8s.helm.v3.Release(
        name, name=options.chart, chart=chart, version=version, namespace=namespace, create_namespace=True,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo) if repo else None, values=values,
        atomic=options.atomic, skip_await=not options.wait, timeout=options.timeout_seconds, opts=opts)
