"""Pure node bootstrap text (cloud-init, kubeadm and kubelet configuration). No pulumi import."""
