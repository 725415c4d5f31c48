"""The gpucluster CrossGuard policy pack. Rules live in `policies.rules`; `__main__` only builds the pack."""
