"""``dsm serve``: parse options, make one call on :mod:`dsm.viewers.web`, say where it listens.

Without the ``web`` extra the command exits 2 naming it (``pip install 'dsm[web]'``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from dsm.cli.options import (
    CacheDirOpt,
    JsonOpt,
    ReasonOpt,
    RegistryOpt,
    StorageOpt,
    UnmaskOpt,
    storage_options,
)

__all__ = ["add_to", "serve"]


def serve(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on (default 127.0.0.1: this machine only). Any other needs --token.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="TCP port (0 picks a free one).")
    ] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="DSM_SERVE_TOKEN",
            show_envvar=True,
            help="Every request must carry it (Authorization: Bearer TOKEN, or ?token= once in a browser). "
            "Required with a non-loopback --host; never logged. Prefer DSM_SERVE_TOKEN: other users of the "
            "machine can read a command line.",
        ),
    ] = None,
    unmask: UnmaskOpt = None,
    reason: ReasonOpt = None,
    bench_reports: Annotated[
        str | None,
        typer.Option(
            "--bench-reports", help="A folder of `dsm bench --output` HTML reports to list under /bench."
        ),
    ] = None,
    access_log: Annotated[
        bool, typer.Option("--access-log/--no-access-log", help="One line per request on stderr.")
    ] = True,
    cache_dir: CacheDirOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Serve the registry in a browser, read-only: datasets, versions and lineage, rows by role (text, chat,
    images, audio, video, JSON), RL episodes, row diffs, cutovers and bench reports; every page has a .json
    twin. Classified fields stay masked unless --unmask FIELD (audited). Ctrl-C or SIGTERM stops it
    cleanly (requests in flight finish; exit 0)."""
    from dsm.viewers.web import require_web

    require_web()
    from dsm.viewers.web.server import ServeInfo
    from dsm.viewers.web.server import serve as run

    def ready(info: ServeInfo) -> None:
        from dsm.cli.render import console, err_console, print_json

        if json_output:
            print_json(info.to_dict())
            return
        console.print(f"dsm serve: {info.url}", highlight=False, soft_wrap=True)
        details = f"registry {info.registry}, {info.datasets} datasets, read-only"
        if info.token_required:
            details += "; requests need the token (open the page once with ?token=...)"
        if info.unmasked:
            details += f"; unmasked (audited): {', '.join(info.unmasked)}"
        err_console.print(f"{details}; Ctrl-C stops", highlight=False, soft_wrap=True)

    run(
        registry=registry,
        host=host,
        port=port,
        token=token,
        unmask=unmask or (),
        reason=reason,
        storage_options=storage_options(storage_option),
        cache_dir=cache_dir,
        bench_reports=bench_reports,
        access_log=access_log,
        on_ready=ready,
    )


_EPILOG = (
    "Examples:\n\n  dsm serve\n\n  dsm serve --registry s3://ml-registry/ --port 8080\n\n"
    "  export DSM_SERVE_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(24))')\n\n"
    "  dsm serve --host 0.0.0.0 --port 8080\n\n"
    "  dsm serve --unmask email --reason 'ticket 4411'\n\n"
    "Pages: / (datasets), /d/NAME, /d/NAME@VERSION, /d/NAME@VERSION/rows?offset=0&length=100, "
    "/d/NAME@VERSION/row/N, /d/NAME@VERSION/episodes, /d/OLD/diff/NEW, /cutovers; add .json for the data."
)


def add_to(app: typer.Typer) -> None:
    app.command(name="serve", epilog=_EPILOG)(serve)
