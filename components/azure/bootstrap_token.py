"""A kubeadm bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`) from pulumi-random, kept secret."""

from __future__ import annotations

import pulumi
import pulumi_random as random


class BootstrapToken(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:BootstrapToken", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.token_id = random.RandomString(f"{name}-id", length=6, upper=False, special=False, opts=child).result
        secret = random.RandomPassword(f"{name}-secret", length=16, upper=False, special=False, opts=child).result
        self.token = pulumi.Output.secret(pulumi.Output.concat(self.token_id, ".", secret))
        self.register_outputs({})
