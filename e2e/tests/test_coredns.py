"""CoreDNS at the pin, started with the Corefile dev renders (kube-system/coredns ConfigMap), against the real API
server: it must accept every plugin and option, and answer the `kubernetes` Service's name with its ClusterIP.

Only what a pod gets from its environment changes: the kubernetes plugin's in-cluster credentials become a
kubeconfig (the plugin's own `kubeconfig` option), the server block listens on a free loopback port, and the health,
ready and metrics endpoints take free ports.
"""

from __future__ import annotations

import re
import socket
import struct
from pathlib import Path

import yaml

from e2e import control_plane as cp
from e2e.cluster import Stack
from e2e.consumers import binary
from e2e.processes import Program, free_ports
from e2e.report import E2EReport


def _localise(corefile: str, kubeconfig: Path, dns: int, health: int, ready: int, metrics: int) -> str:
    corefile = corefile.replace(".:53 {", f".:{dns} {{", 1)
    corefile = re.sub(r"\bhealth \{", f"health :{health} {{", corefile)
    corefile = re.sub(r"\bready\b", f"ready :{ready}", corefile, count=1)
    corefile = re.sub(r"prometheus :\d+", f"prometheus 127.0.0.1:{metrics}", corefile)
    return re.sub(r"(kubernetes [^{]*\{)", rf"\1\n        kubeconfig {kubeconfig}", corefile, count=1)


def _query(port: int, name: str) -> list[str]:
    """One A query over UDP; the answers' addresses."""
    header = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(header + question, ("127.0.0.1", port))
        data, _ = s.recvfrom(4096)
    answers = struct.unpack(">H", data[6:8])[0]
    offset = 12 + len(question)
    found = []
    for _ in range(answers):
        offset += 2 if data[offset] & 0xC0 == 0xC0 else data.index(b"\x00", offset) + 1 - offset
        kind, _cls, _ttl, length = struct.unpack(">HHIH", data[offset:offset + 10])
        offset += 10
        if kind == 1:
            found.append(socket.inet_ntoa(data[offset:offset + length]))
        offset += length
    return found


def test_coredns_serves_the_rendered_corefile(dev_stack: Stack, tmp_path: Path, report: E2EReport) -> None:
    config_map = yaml.safe_load((dev_stack.out / "manifests" / "10-configmap-kube-system-coredns.yaml").read_text())
    dns, health, ready, metrics = free_ports(4)
    corefile = tmp_path / "Corefile"
    corefile.write_text(_localise(config_map["data"]["Corefile"], dev_stack.plane.admin_kubeconfig, dns, health, ready,
                                  metrics))
    program = Program("coredns", [str(binary("coredns")), "-conf", str(corefile)], tmp_path / "coredns.log").start()
    try:
        service = cp.json_get(dev_stack.plane, "/api/v1/namespaces/default/services/kubernetes")["spec"]["clusterIP"]

        def answers() -> list[str]:
            try:
                return _query(dns, "kubernetes.default.svc.cluster.local")
            except OSError:
                return []

        cp.wait_until(lambda: answers() == [service], 120, "CoreDNS answers the kubernetes Service", program)
        report.scenario("CoreDNS serves dev's Corefile from the real API server", "passed", answer=service)
    finally:
        program.stop()
