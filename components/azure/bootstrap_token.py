"""A kubeadm bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`) from pulumi-random, kept secret.

The id part is public by kubeadm's design (it names the Secret `bootstrap-token-<id>` in kube-system); the
secret part authenticates. Raising `generation` replaces both (pulumi-random replaces a resource whose
`keepers` change), which is how the token is rotated.
"""

from __future__ import annotations

import pulumi
import pulumi_random as random


class BootstrapToken(pulumi.ComponentResource):
    def __init__(self, name: str, generation: int, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:BootstrapToken", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keepers = {"generation": str(generation)}
        self.token_id = random.RandomString(f"{name}-id", length=6, upper=False, special=False, keepers=keepers,
                                            opts=child).result
        secret = random.RandomPassword(f"{name}-secret", length=16, upper=False, special=False, keepers=keepers,
                                       opts=child).result
        self.token = pulumi.Output.secret(pulumi.Output.concat(self.token_id, ".", secret))
        self.register_outputs({"tokenId": self.token_id})
