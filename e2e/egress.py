"""The API server's way to Services that no kubelet runs here: kube-apiserver's own egress selector (an
EgressSelectorConfiguration whose `cluster` traffic goes through an HTTP CONNECT proxy, k8s.io/apiserver
apis/apiserver/v1beta1) pointed at this proxy, which sends a connection for a Service's ClusterIP and port to the
process on loopback that serves it (Kueue's webhooks and visibility API). Unknown destinations are refused with 502.

So the webhook configurations and APIServices stay as the charts render them (Service references, the CA bundle
Kueue's own certificate rotation writes) and the API server verifies the serving certificate by the Service's name,
as in a cluster.
"""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml


@dataclass
class Egress:
    routes: dict[tuple[str, int], int] = field(default_factory=dict)
    """(ClusterIP, port) -> the loopback port serving it."""
    refused: list[str] = field(default_factory=list)
    server: socketserver.ThreadingUnixStreamServer | None = None
    socket_path: Path | None = None

    def configuration(self, path: Path) -> Path:
        """HTTPConnect over a Unix socket: the API server's TCP transport wants a client certificate."""
        path.write_text(yaml.safe_dump({
            "apiVersion": "apiserver.k8s.io/v1beta1", "kind": "EgressSelectorConfiguration",
            "egressSelections": [{"name": "cluster", "connection": {
                "proxyProtocol": "HTTPConnect", "transport": {"uds": {"udsName": str(self.socket_path)}}}}]}))
        return path

    def start(self, socket_path: Path) -> Egress:
        egress = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                request = self.rfile.readline(65536).decode("latin-1").split()
                while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                    pass
                if len(request) < 2 or request[0] != "CONNECT":
                    self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                    return
                host, _, port = request[1].rpartition(":")
                target = egress.routes.get((host.strip("[]"), int(port or 0)))
                if target is None:
                    egress.refused.append(request[1])
                    self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
                    return
                try:
                    upstream = socket.create_connection(("127.0.0.1", target), timeout=10)
                except OSError:
                    self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
                    return
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                _pipe(self.connection, upstream)

        self.socket_path = socket_path
        server = socketserver.ThreadingUnixStreamServer(str(socket_path), Handler)
        server.daemon_threads = True
        self.server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    with contextlib.closing(b):
        sockets = [a, b]
        while True:
            readable, _, _ = select.select(sockets, [], [], 300)
            if not readable:
                return
            for s in readable:
                try:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
                except OSError:  # either side went away: the other sees the connection close
                    return
