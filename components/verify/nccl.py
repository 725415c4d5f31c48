"""`verify --nccl`: a two-node NCCL all-reduce within one InfiniBand domain, run as an indexed Job.

This is the one part of verify that writes, and only when asked: it creates a headless Service and a Job in the
health namespace through a Kubernetes client of its own (the read-only checks never hold one), waits for the Job,
reads rank 0's log, and deletes both. Everything else in components/verify/ reads.

The pods take every GPU of two nodes of one domain (nodeSelector on the domain label, one pod per node), reach the
InfiniBand devices as the node's own processes do (privileged, /dev/infiniband from the host: the cluster runs no
RDMA device plugin), rendezvous over the pod network (torchrun c10d at rank 0's stable name under the headless
Service) and all-reduce 1 GiB with NCCL. It passes when the Job succeeds, the result is exact, every communicator NCCL
set up says `Using network IB` (NVIDIA/nccl src/init.cc `commAlloc`: `INFO(NCCL_INIT, "Using network %s",
comm->ncclNet->name)`, read at 48bb7fec7953112ff37499a272317f6663f8f600; a socket fallback logs `NET/IB : No device
found.` and then `Using network Socket`, so a mere `NET/IB` in the log proves nothing), and the bus bandwidth reaches
the size's floor: FLOOR_SHARE of its InfiniBand line rate (IB_LINE_RATE, from the Microsoft Learn size pages).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from gpucluster.kubernetes.objects import health
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_template import node_taints
from gpucluster.planning.placement import PoolPlan
from gpucluster.verify.kube import Kube
from gpucluster.verify.results import Check, Result
from gpucluster.vocabulary import (
    GPU_RESOURCE,
    LABEL_APP,
    LABEL_HOSTNAME,
    LABEL_IB_DOMAIN,
    LABEL_JOB_COMPLETION_INDEX,
    LABEL_NCCL_RUN,
)

NCCL = Check("cluster.nccl", "NCCL's `Using network IB` (NVIDIA/nccl src/init.cc commAlloc, NCCL_DEBUG=INFO); "
                             "torch.distributed all_reduce with the nccl backend; Kubernetes indexed Jobs (pod hostname "
                             "<job>-<index> under the Job's subdomain); the size's InfiniBand line rate (IB_LINE_RATE)")
NETWORK = re.compile(r"NCCL INFO Using network (?P<name>\S+)")
IB_LINE_RATE: dict[str, tuple[int, int, str]] = {
    "Standard_ND96isr_H100_v5": (8, 400, "MicrosoftDocs/azure-docs articles/virtual-machines/sizes/gpu-accelerated/"
                                         "includes/ndh100v5-series-summary.md (2467ea4): each GPU has its own 400 Gb/s "
                                         "NVIDIA Quantum-2 CX7 InfiniBand connection, 3.2 Tbps per VM"),
    "Standard_ND128isr_GB300_v6": (4, 800, "MicrosoftDocs/azure-compute-docs articles/virtual-machines/sizes/"
                                           "gpu-accelerated/nd-gb300-v6-series.md (0c72655): 4 scale-out NICs, "
                                           "4x800 Gbps"),
}
"""Size -> (InfiniBand NICs, Gb/s each, source). A size not listed has no sourced rate: its bandwidth is printed,
not judged."""
FLOOR_SHARE = 0.7
"""The bus-bandwidth floor as a share of the line rate: a healthy two-node all-reduce of 1 GiB reaches most of it; a
missing rail, a link trained at a lower speed or a socket fallback (a few GB/s) falls far below."""
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"
"""NVIDIA's PyTorch container (CUDA, NCCL and its IB plugin, torchrun), served through the registry's nvcr cache."""
NAMESPACE = health.NAMESPACE
PORT = 29500
BYTES = 1 << 30
TIMEOUT_SECONDS = 1800
POLL_SECONDS = 10.0
RESULT = re.compile(r"nccl-allreduce ranks=(?P<ranks>\d+) bytes=(?P<bytes>\d+) busbw_GBps=(?P<busbw>[0-9.]+) exact=True")
SCRIPT = f"""
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
world, rank = dist.get_world_size(), dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.empty({BYTES} // 4, device="cuda")
x.fill_(1.0); dist.all_reduce(x); torch.cuda.synchronize()
exact = bool(torch.all(x == world).item())
for _ in range(5): dist.all_reduce(x)
torch.cuda.synchronize(); start = time.time()
for _ in range(20): dist.all_reduce(x)
torch.cuda.synchronize(); seconds = (time.time() - start) / 20
busbw = {BYTES} / seconds * 2 * (world - 1) / world / 1e9
if rank == 0: print(f"nccl-allreduce ranks={{world}} bytes={BYTES} busbw_GBps={{busbw:.1f}} exact={{exact}}", flush=True)
dist.destroy_process_group()
"""


def job_objects(name: str, domain: str, pool: PoolPlan, image: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The headless Service and the indexed Job of one run in `domain`."""
    labels = {LABEL_APP: "gpucluster-nccl", LABEL_NCCL_RUN: name}
    gpus = pool.size.gpus
    command = ["torchrun", "--nnodes=2", f"--nproc-per-node={gpus}", "--rdzv-backend=c10d",
               f"--rdzv-endpoint={name}-0.{name}.{NAMESPACE}.svc:{PORT}", f"--rdzv-id={name}", "-c", SCRIPT]
    tolerations = [{"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in node_taints(pool)]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE,
                                                                     "labels": labels},
               "spec": {"clusterIP": "None", "selector": labels, "publishNotReadyAddresses": True,
                        "ports": [{"name": "rendezvous", "port": PORT}]}}
    pod = {
        "subdomain": name, "restartPolicy": "Never", "nodeSelector": {LABEL_IB_DOMAIN: domain},
        "tolerations": tolerations,
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": LABEL_HOSTNAME}]}},
        "containers": [{
            "name": "allreduce", "image": image, "command": command,
            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"}],
            "ports": [{"containerPort": PORT}],
            "resources": {"limits": {GPU_RESOURCE: gpus}},
            "securityContext": {"privileged": True, "capabilities": {"add": ["IPC_LOCK"]}},
            "volumeMounts": [{"name": "infiniband", "mountPath": "/dev/infiniband"},
                             {"name": "shm", "mountPath": "/dev/shm"}]}],
        "volumes": [{"name": "infiniband", "hostPath": {"path": "/dev/infiniband"}},
                    {"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
           "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 0,
                    "activeDeadlineSeconds": TIMEOUT_SECONDS,
                    "template": {"metadata": {"labels": labels}, "spec": pod}}}
    return service, job


def pick_domain(plan: ClusterPlan, nodes: list[dict[str, Any]]) -> tuple[str, PoolPlan] | None:
    """The first InfiniBand domain with two Ready nodes."""
    ready: dict[str, int] = {}
    for node in nodes:
        labels = node.get("metadata", {}).get("labels") or {}
        if any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or []):
            ready[labels.get(LABEL_IB_DOMAIN, "none")] = ready.get(labels.get(LABEL_IB_DOMAIN, "none"), 0) + 1
    for pool in (p for p in plan.pools if p.infiniband):
        for scale_set in pool.scale_sets:
            if ready.get(scale_set.name, 0) >= 2:
                return scale_set.name, pool
    return None


class NcclError(Exception):
    """The API server refused one of the run's writes."""


class Writer:
    """The writes of one run, through an unguarded client of their own."""

    def __init__(self, api_client: Any) -> None:
        self._api = api_client

    def send(self, method: str, path: str, body: Any = None, query: list[tuple[str, Any]] | None = None) -> Any:
        import json

        serialized = self._api.param_serialize(method, path, query_params=query or [], body=body,
                                               header_params={"Accept": "application/json",
                                                              "Content-Type": "application/json"},
                                               auth_settings=["BearerToken"])
        response = self._api.call_api(*serialized, _request_timeout=60)
        response.read()
        if response.status >= 400 and not (method == "DELETE" and response.status == 404):
            raise NcclError(f"{method} {path}: HTTP {response.status}")
        return json.loads(response.data) if response.data and response.data[:1] in (b"{", b"[") else response.data


def run_nccl(plan: ClusterPlan, kubeconfig: str, context: str | None, reader_client: Any,
             poll: float = POLL_SECONDS, clock: Callable[[], float] = time.monotonic) -> list[Result]:
    from gpucluster.verify.connect import kube_client

    kube = Kube(reader_client)
    found = pick_domain(plan, kube.list("/api/v1/nodes"))
    if found is None:
        return [NCCL.failed("InfiniBand domains", "no InfiniBand domain has two Ready nodes",
                            "scale a domain to two nodes (its scale set) or wait for the autoscaler")]
    domain, pool = found
    try:
        image = plan.registry.serve(IMAGE)
    except KeyError:
        return [NCCL.failed(domain, "the registry has no cache rule for nvcr.io",
                            "add nvcr.io to cluster.registry.extraUpstreams")]
    name = f"gpucluster-nccl-{int(time.time())}"
    service, job = job_objects(name, domain, pool, image)
    writer = Writer(kube_client(kubeconfig, context))
    base = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    try:
        writer.send("POST", f"/api/v1/namespaces/{NAMESPACE}/services", service)
        writer.send("POST", base, job)
        deadline = clock() + TIMEOUT_SECONDS + 60
        status: dict[str, Any] = {}
        while clock() < deadline:
            status = (kube.get(f"{base}/{name}") or {}).get("status") or {}
            if status.get("succeeded", 0) >= 2 or status.get("failed", 0):
                break
            time.sleep(poll)
        log = _rank0_log(kube, name)
    finally:
        writer.send("DELETE", f"{base}/{name}", query=[("propagationPolicy", "Background")])
        writer.send("DELETE", f"/api/v1/namespaces/{NAMESPACE}/services/{name}")
    return [_verdict(domain, status, log, pool.size.name)]


def _rank0_log(kube: Kube, job: str) -> str:
    pods = kube.list(f"/api/v1/namespaces/{NAMESPACE}/pods",
                     [("labelSelector", f"job-name={job},{LABEL_JOB_COMPLETION_INDEX}=0")])
    if not pods:
        return ""
    name = pods[0]["metadata"]["name"]
    return kube.text(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/log")


def floor_gbps(size: str) -> tuple[float, str] | None:
    """The bus-bandwidth floor in GB/s for a VM size, with its source; None where no line rate is sourced."""
    if size not in IB_LINE_RATE:
        return None
    nics, gbits, source = IB_LINE_RATE[size]
    return FLOOR_SHARE * nics * gbits / 8, source


def _verdict(domain: str, status: dict[str, Any], log: str, size: str = "") -> Result:
    subject = f"domain {domain}"
    fix = ("read the rank-0 log (NCCL_DEBUG=INFO): `Using network Socket` (after `NET/IB : No device found.`) means "
           "NCCL fell back to sockets (ibstat on the nodes, the cluster.infiniband check); a low bandwidth with IB: "
           "ibstat for a port down or at a lower rate; a pending pod means the domain's GPUs are taken (run before "
           "workloads)")
    match = RESULT.search(log)
    networks = sorted({m["name"] for m in NETWORK.finditer(log)})
    if status.get("succeeded", 0) < 2:
        return NCCL.failed(subject, f"the Job did not complete (succeeded {status.get('succeeded', 0)}, failed "
                                    f"{status.get('failed', 0)})", fix)
    if networks != ["IB"]:
        said = ", ".join(networks) if networks else "no `Using network` line (is NCCL_DEBUG=INFO set?)"
        return NCCL.failed(subject, f"NCCL did not use InfiniBand: it says Using network {said}", fix)
    if match is None:
        return NCCL.failed(subject, "no exact all-reduce result in the log", fix)
    busbw = float(match["busbw"])
    floor = floor_gbps(size)
    if floor is not None and busbw < floor[0]:
        return NCCL.failed(subject, f"bus bandwidth {busbw:.1f} GB/s over InfiniBand is below the floor of "
                                    f"{floor[0]:.0f} GB/s for {size} ({FLOOR_SHARE:.0%} of its line rate)", fix,
                           f"{NCCL.source}; {floor[1]}")
    judged = f", floor {floor[0]:.0f} GB/s for {size}" if floor is not None else \
        f" (no sourced line rate for {size or 'this size'}: not judged)"
    return NCCL.passed(subject, f"{match['ranks']} ranks over InfiniBand (Using network IB), 1 GiB all-reduce exact, "
                                f"bus bandwidth {busbw:.1f} GB/s{judged}")
