"""An MCP server a request names by URL is reached at the address that was checked, never looked up again.

Real sockets on loopback: a listener counting connections, and a TLS listener noting the
name the client asks for (SNI). A rebinding name (public when checked, loopback when
connecting) must not reach the loopback listener; a pinned connection must speak TLS to
the URL's host name and refuse a certificate nobody vouches for.
"""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from harness.servers import ROOT

PUBLIC = "93.184.216.34"  # what the name says when it is checked (nothing is reached there: no network)


class Listener:
    """A loopback listener that accepts (and closes) connections, counting them; with `tls`, it first
    completes a TLS handshake as far as the client lets it, noting the server name asked for."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted, self.tls = 0, tls
        self.names: list[str | None] = []
        if tls is not None:
            tls.sni_callback = lambda _sock, name, _ctx: self.names.append(name)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            with conn:
                if self.tls is not None:
                    conn.settimeout(5)
                    try:
                        self.tls.wrap_socket(conn, server_side=True).close()
                    except (ssl.SSLError, OSError):
                        pass  # the client refused the certificate, as it must

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


# The MCP client runs the SDK's asyncio loop in a greenlet, which needs gevent's patching, as in a
# worker: each exchange runs in a fresh interpreter patched so, with an attacker's DNS where asked.
_EXCHANGE = """
import json, socket, sys
from gevent import monkey
monkey.patch_all()
from app.api.http.destinations import cleared
from app.mcp.client import list_tools
from app.mcp.servers import Limits, McpError, McpServer, Pin

url, address, seconds, PUBLIC = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
real, looked_up = socket.getaddrinfo, []

def resolve(host, port, *args, **kwargs):  # flip.example: public when checked, loopback after
    if (host.decode() if isinstance(host, bytes) else host) != "flip.example":  # anyio asks in bytes
        return real(host, port, *args, **kwargs)
    looked_up.append("flip.example")
    found = PUBLIC if len(looked_up) == 1 else "127.0.0.1"
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (found, port))]

socket.getaddrinfo = resolve
if address == "checked":
    target = cleared(url, (url.split("/")[2],), "LLM_MCP_ALLOW", "calls MCP servers on")
    pin = Pin(target.host, target.address, target.port)
else:
    host, port = url.split("/")[2].split(":")
    pin = Pin(host, address, int(port))
try:
    list_tools(McpServer("test", url, pin), Limits(seconds, 65536))
    error = None
except McpError as exc:
    error = str(exc)
print(json.dumps({"pin": pin.address, "error": error, "looked_up": looked_up}))
"""


def exchange(url: str, address: str, seconds: float) -> dict[str, Any]:
    """List the tools of the MCP server at `url`, pinned to `address` ("checked": as a request's URL
    is, through destinations.cleared), in a patched interpreter: what happened."""
    done = subprocess.run(
        [sys.executable, "-c", _EXCHANGE, url, address, str(seconds), PUBLIC],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_name_that_resolves_elsewhere_when_connecting_is_never_looked_up_again(scheme: str) -> None:
    listener = Listener()
    try:
        outcome = exchange(f"{scheme}://flip.example:{listener.port}/mcp", "checked", 1.0)
    finally:
        listener.close()
    assert outcome["pin"] == PUBLIC and outcome["error"]  # nothing answers there
    assert outcome["looked_up"] == ["flip.example"]  # looked up once, when checked
    assert listener.accepted == 0  # the loopback the name turned to later was never reached


def self_signed(folder: Path, name: str) -> ssl.SSLContext:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return context


def test_a_pinned_https_server_is_asked_for_by_its_name_and_its_certificate_checked(tmp_path: Path) -> None:
    listener = Listener(self_signed(tmp_path, "mcp.example"))
    try:
        outcome = exchange(f"https://mcp.example:{listener.port}/mcp", "127.0.0.1", 5.0)
    finally:
        listener.close()
    assert listener.accepted >= 1 and set(listener.names) == {"mcp.example"}  # at the address, by the name
    assert "CERTIFICATE_VERIFY_FAILED" in outcome["error"]  # self-signed: no authority vouches for it
