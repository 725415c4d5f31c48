"""`gpucluster verify <stack>`: what only the live subscription and cluster can settle, read without writing.

The plan checks everything a stack file and the consumers' rules decide; this package reads the deployed
subscription (Microsoft's ARM SDKs) and cluster (the Kubernetes Python client) and checks each assumption the plan
makes about them. Every client it builds refuses a request other than GET or HEAD before it is sent
(components/verify/readonly.py); the one opt-in exception, `--nccl`, creates a Job through a client of its own.
"""
