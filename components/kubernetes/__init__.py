"""The in-cluster layer: Kubernetes objects built as plain dicts (objects/) and declared through a provider."""
