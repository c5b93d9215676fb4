"""Transient errors (503, throttling) are retried by the storage library's own mechanism, and counted.

A small proxy on loopback sits in front of moto / Azurite and answers some requests with 503 (S3
``SlowDown``, Azure ``ServerBusy``) before the real server sees them. register and verify must still give
the right answer, and verify's notes must say how many requests were retried.
"""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pytest

import dsm
from dsm.object_store import request_stats
from dsm.storage import location

from .conftest import StorageRoot, write_parquet_shards
from .servers import AzuriteServer, MotoServer

S3_BUSY = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
AZURE_BUSY = b"<Error><Code>ServerBusy</Code><Message>The server is busy.</Message></Error>"


@dataclass
class FlakyProxy:
    url: str
    failed: int = 0


@pytest.fixture
def flaky_proxy(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A factory: ``flaky(target_url, every, limit, body)`` -> a proxy that fails every ``every``-th
    request with 503 (at most ``limit`` times, never the same request twice in a row) and forwards the rest
    to ``target_url``."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(target: str, every: int, limit: int, body: bytes) -> FlakyProxy:
        parts = urlsplit(target)
        lock = threading.Lock()
        seen = [0]
        just_failed: set[tuple[str, str, str | None]] = set()
        proxy = FlakyProxy(url="")

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = self.rfile.read(length) if length else None
                # The same request (method, key, range) never fails twice in a row: requests of parallel
                # threads may interleave, and three 503s for one request would exhaust its attempts.
                call = (self.command, self.path, self.headers.get("Range"))
                with lock:
                    seen[0] += 1
                    fail = seen[0] % every == 0 and proxy.failed < limit and call not in just_failed
                    if fail:
                        proxy.failed += 1
                        just_failed.add(call)
                    else:
                        just_failed.discard(call)
                if fail:
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    # A HEAD answer has no body (as a real store's): one written anyway stays in the
                    # connection, and the client reads it as the start of its next response.
                    if self.command != "HEAD":
                        self.wfile.write(body)
                    return
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = parts.netloc
                conn.request(self.command, self.path, body=payload, headers=headers)
                response = conn.getresponse()
                data = response.read()
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                # A HEAD answer has no body but tells the object's length: pass that on unchanged.
                length = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
        return proxy

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_s3_throttling_is_retried_and_counted(
    moto_server: MotoServer,
    s3_storage: StorageRoot,
    sample_table: pa.Table,
    registry_url: str,
    flaky_proxy: Any,
) -> None:
    write_parquet_shards(s3_storage, sample_table.slice(0, 300), 3)
    proxy = flaky_proxy(moto_server.endpoint_url, every=3, limit=4, body=S3_BUSY)
    options = {**s3_storage.options, "endpoint_url": proxy.url}
    contract = dsm.register(s3_storage.url, name="flaky", registry=registry_url, storage_options=options)
    assert len(contract.shards) == 3 and contract.fingerprint is not None and contract.fingerprint.rows == 300
    assert proxy.failed == 4
    # Four more 503s, for verify (which makes fewer requests: every other one fails, until four have). One
    # worker: requests of parallel threads interleaved could give one request three 503s in a row.
    proxy = flaky_proxy(moto_server.endpoint_url, every=2, limit=4, body=S3_BUSY)
    options = {**s3_storage.options, "endpoint_url": proxy.url}
    report = dsm.verify("flaky", registry=registry_url, storage_options=options, workers=1)
    assert report.ok and {s.status for s in report.shards} == {"ok"}
    assert proxy.failed == 4
    stats = request_stats(location(s3_storage.url, options))
    # Every injected 503 was retried (a dropped proxy connection may add a retry of its own).
    assert stats is not None and stats.retries >= 4 and stats.failures == 0
    # verify says what its own requests went through: some of the 503s hit it.
    notes = [n for n in report.notes if n.startswith("storage:")]
    assert notes and "retried after transient errors" in notes[0], report.notes


def test_azure_server_busy_is_retried_and_counted(
    azurite_server: AzuriteServer, sample_table: pa.Table, registry_url: str, flaky_proxy: Any
) -> None:
    container = "flaky"
    azurite_server.service().create_container(container)
    proxy = flaky_proxy(azurite_server.blob_endpoint, every=4, limit=4, body=AZURE_BUSY)
    account_path = urlsplit(azurite_server.blob_endpoint).path
    connection = azurite_server.connection_string.replace(
        f"BlobEndpoint={azurite_server.blob_endpoint};", f"BlobEndpoint={proxy.url}{account_path};"
    )
    root = StorageRoot(
        kind="azure",
        url=f"az://{container}/data",
        options={
            "connection_string": connection,
            "retry_backoff": 0.05,
            "retry_backoff_base": 0.1,
            "retry_jitter": 0.01,
        },
    )
    write_parquet_shards(root, sample_table.slice(0, 300), 2)
    dsm.register(root.url, name="flaky", registry=registry_url, storage_options=root.options)
    report = dsm.verify("flaky", registry=registry_url, storage_options=root.options)
    assert report.ok
    assert proxy.failed == 4
    stats = request_stats(location(root.url, root.options))
    assert stats is not None and stats.retries >= 4 and stats.failures == 0
