"""``dsm serve``: the app of :mod:`dsm.viewers.web.app` on uvicorn, on one socket this module binds.

The socket is bound before uvicorn starts, so that a busy port or an address this machine does not have is a
one-line error with its exit code (3 and 2), and ``port=0`` picks a free port that the start line names. The
access log goes to stderr without the token (see :mod:`dsm.viewers.web.security`); uvicorn's own logs are
errors only.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from dsm.errors import InputError, StorageError
from dsm.viewers.web.config import DEFAULT_HOST, DEFAULT_PORT, ServeConfig, serve_config

__all__ = ["ServeInfo", "bind", "serve"]


@dataclass(frozen=True, kw_only=True)
class ServeInfo:
    """Where a started server listens (what ``dsm serve`` prints; never the token)."""

    url: str
    host: str
    port: int
    registry: str
    datasets: int
    token_required: bool
    unmasked: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "host": self.host,
            "port": self.port,
            "registry": self.registry,
            "datasets": self.datasets,
            "token_required": self.token_required,
            "unmasked": list(self.unmasked),
            "read_only": True,
        }


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port=0``: a free one)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise InputError(f"--host {host}: not an address or a name this machine resolves ({exc})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StorageError(
                f"port {port} on {host} is in use: choose another with --port (0 picks a free one)"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise InputError(f"--host {host} is not an address of this machine") from None
        if exc.errno == errno.EACCES:
            raise StorageError(
                f"no permission to listen on {host}:{port}: ports below 1024 need privileges"
            ) from None
        raise StorageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/"


def serve(
    *,
    registry: str | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    bench_reports: str | None = None,
    threads: int = 8,
    access_log: bool = True,
    on_ready: Callable[[ServeInfo], None] | None = None,
) -> ServeInfo:
    """Serve the registry's datasets read-only on ``host:port`` until stopped (Ctrl-C or SIGTERM: a clean
    stop, returning normally).

    Everything is checked before the socket is bound: a non-loopback ``host`` needs a ``token``
    (``DSM_SERVE_TOKEN``), each ``unmask`` field must be classified in some dataset. ``on_ready`` gets the
    :class:`ServeInfo` once the socket listens. Returns it when the server has stopped.
    """
    import uvicorn

    from dsm.viewers.web.app import create_app

    config: ServeConfig = serve_config(
        registry=registry,
        host=host,
        port=port,
        token=token,
        unmask=unmask,
        reason=reason,
        storage_options=storage_options,
        cache_dir=cache_dir,
        bench_reports=bench_reports,
        threads=threads,
    )
    sock = bind(config.host, config.port)
    bound = sock.getsockname()[1]
    app = create_app(config, port=bound)
    state = app.state.dsm
    state.check_unmask()
    info = ServeInfo(
        url=_url(config.host, bound),
        host=config.host,
        port=bound,
        registry=state.registry_url,
        datasets=len(state.registry.names()),
        token_required=config.token is not None,
        unmasked=config.unmask,
    )
    access = logging.getLogger("dsm.serve.access")
    access.propagate = False
    access.setLevel(logging.INFO if access_log else logging.WARNING)
    if access_log and not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        access.addHandler(handler)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="on",
            server_header=False,
            proxy_headers=False,
        )
    )
    with _stop_on_signals(server):
        if on_ready is not None:
            on_ready(info)
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
    return info


@contextlib.contextmanager
def _stop_on_signals(server: Any) -> Iterator[None]:
    """Ctrl-C and SIGTERM stop ``server`` cleanly (requests in flight finish, :func:`serve` returns), from
    before it starts to after it stops.

    uvicorn handles both signals while it runs, then raises the one it stopped on again under the handlers it
    found: the defaults would turn a clean stop into a ``KeyboardInterrupt`` or a death by SIGTERM, and a
    signal sent as soon as the start line is out would land before uvicorn listens for it. Off the main
    thread (where no handler can be set) uvicorn leaves the signals alone too.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        server.should_exit = True

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
