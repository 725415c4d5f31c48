"""Pure builders of Kubernetes objects (plain dicts, as `kubectl apply` takes them). No pulumi import."""
