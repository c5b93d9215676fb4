"""The Starlette app of ``dsm serve``: its routes (each page and its ``.json`` twin), templates, static files,
the request guard and the lifespan that bounds how many requests decode at once.

>>> app = create_app(ServeConfig(registry="/data/registry"))  # doctest: +SKIP
>>> from starlette.testclient import TestClient  # doctest: +SKIP
>>> TestClient(app).get("/index.json").json()["datasets"]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from dsm._version import __version__
from dsm.registry import Registry
from dsm.units import format_bytes, format_seconds
from dsm.viewers.web import catalog_pages, cutover_pages, diff_pages, episode_pages, links, row_pages
from dsm.viewers.web.config import ServeConfig
from dsm.viewers.web.http import endpoint, error_response, twin, wants_json
from dsm.viewers.web.security import Guard
from dsm.viewers.web.state import ServerState

__all__ = ["create_app", "routes"]


def routes() -> list[BaseRoute]:
    """Every route: the documented API (docs/serve.md); each page also answers ``PATH.json``."""
    return [
        Route("/", endpoint(catalog_pages.registry_page), methods=["GET", "HEAD"], name="registry"),
        Route("/index.json", endpoint(catalog_pages.registry_page), methods=["GET", "HEAD"]),
        *twin("/cutovers", cutover_pages.cutovers_page),
        *twin("/cutovers/{cutover}", cutover_pages.cutover_page),
        Route("/cutovers/{cutover}/bench", endpoint(cutover_pages.cutover_bench), methods=["GET", "HEAD"]),
        *twin("/bench", cutover_pages.bench_list),
        Route("/bench/{name}", endpoint(cutover_pages.bench_report), methods=["GET", "HEAD"]),
        *twin("/d/{ref}/rows", row_pages.rows_page),
        *twin("/d/{ref}/row/{position}", row_pages.row_page),
        *twin("/d/{ref}/find", row_pages.find_page),
        Route("/d/{ref}/media.json", endpoint(row_pages.media_info), methods=["GET", "HEAD"]),
        Route("/d/{ref}/media", endpoint(row_pages.media), methods=["GET", "HEAD"]),
        *twin("/d/{ref}/episodes", episode_pages.episodes_page),
        *twin("/d/{ref}/episode", episode_pages.episode_page),
        *twin("/d/{ref}/diff/{new}", diff_pages.diff_page),
        *twin("/d/{ref}/verify", catalog_pages.verify_page),
        *twin("/d/{ref}", _dataset_or_version),
        Route("/d/{ref}/", endpoint(_dataset_or_version), methods=["GET", "HEAD"]),
        Mount("/static", StaticFiles(packages=[("dsm.viewers.web", "static")]), name="static"),
    ]


def _dataset_or_version(request: Request, state: ServerState) -> Any:
    """``/d/NAME`` is the dataset (its versions and lineage); ``/d/NAME@VERSION`` one version."""
    if "@" in request.path_params["ref"]:
        return catalog_pages.version_page(request, state)
    return catalog_pages.dataset_page(request, state)


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dsm.viewers.web", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["bytes"] = lambda n: format_bytes(n) if n is not None else "-"
    env.filters["seconds"] = lambda n: format_seconds(n) if n is not None else "-"
    env.filters["count"] = lambda n: f"{n:,}" if isinstance(n, int) else ("-" if n is None else str(n))
    env.globals["links"] = links
    env.globals["dsm_version"] = __version__
    return Jinja2Templates(env=env)


def create_app(
    config: ServeConfig, *, registry: Registry | None = None, port: int | None = None
) -> Starlette:
    """The app for ``config`` (``registry`` overrides ``config.registry``; ``port`` is the one the server
    listens on, for the ``Host`` check)."""
    state = ServerState(config, registry)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import anyio.to_thread

        # Each request decodes at most a few pieces: a bound on them at once is a bound on memory.
        anyio.to_thread.current_default_thread_limiter().total_tokens = config.threads
        try:
            yield
        finally:
            state.close()

    app = Starlette(
        routes=routes(),
        middleware=[
            Middleware(
                Guard,  # type: ignore[arg-type]
                token=config.token,
                hosts=config.host_names(port if port is not None else config.port),
            )
        ],
        lifespan=lifespan,
        exception_handlers={404: _no_route},
        debug=False,
    )
    app.state.dsm = state
    app.state.templates = _templates()
    return app


async def _no_route(request: Request, exc: Exception) -> Response:
    """A URL no route has (404): the error page, or JSON for a ``.json`` URL."""
    from dsm.errors import DatasetNotFound

    error = DatasetNotFound(f"no page at {request.url.path[:200]}; the front page lists the datasets")
    return error_response(request, error, wants_json(request))
