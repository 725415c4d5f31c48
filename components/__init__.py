"""gpucluster: Pulumi components for a self-managed Kubernetes GPU training cluster on Azure."""
