"""``dsm register``: parse options, call :func:`dsm.commands.register.register`, render the new contract."""

from __future__ import annotations

import warnings
from typing import Annotated, Any

import typer

from dsm.cli.options import (
    EngineOpt,
    JsonOpt,
    RayAddressOpt,
    RegistryOpt,
    StorageOpt,
    WorkersOpt,
    storage_options,
)
from dsm.cli.render import console, engine_line, esc, human_bytes, print_json, progress_for

__all__ = ["add_to", "register"]

_EPILOG = (
    "Examples:\n\n  dsm register data/web-text/ --name web-text\n\n"
    "  dsm register 's3://bucket/logs/*.jsonl' --name logs --schema logs-schema.yaml --json\n\n"
    "  dsm register data/chats/ --name chats --scan-pii\n\n"
    "  dsm register data/rollouts/ --name rollouts --infer-roles   (then --write-roles to keep them)\n\n"
    "  dsm register s3://bucket/web-text/ --name web-text --engine ray --ray-address HEAD:6379"
)


def register(
    source: Annotated[str, typer.Argument(help="Folder, glob or file of shards; any fsspec URL.")],
    name: Annotated[str, typer.Option("--name", help="Dataset name in the registry.")],
    format: Annotated[
        str | None, typer.Option("--format", help="Shard format (default: from extensions).")
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option("--schema", help="Schema: a dataset reference or a YAML file (contract or fields)."),
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", help="One line about the dataset.")
    ] = None,
    owner: Annotated[
        list[str] | None, typer.Option("--owner", help="An owner (repeatable, or several comma-separated).")
    ] = None,
    key: Annotated[list[str] | None, typer.Option("--key", help="A key field (repeatable).")] = None,
    infer_roles: Annotated[
        bool,
        typer.Option("--infer-roles", help="Propose field roles from names and values (shown, not written)."),
    ] = False,
    write_roles: Annotated[
        bool, typer.Option("--write-roles", help="Write the proposed roles into the contract.")
    ] = False,
    scan_pii: Annotated[
        bool,
        typer.Option(
            "--scan-pii",
            help="Warn about likely e-mail addresses, phone and card numbers in unclassified fields.",
        ),
    ] = False,
    allow_breaking: Annotated[
        bool,
        typer.Option(
            "--allow-breaking",
            help="Register a schema that `dsm diff` calls breaking for readers of the newest version.",
        ),
    ] = False,
    workers: WorkersOpt = None,
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Scan shards and write a new version of the dataset's contract."""
    import dsm.commands.register as register_command
    from dsm.engine import open_executor

    # The executor is made here (it connects only when units run) so that the line below can say where
    # they ran: the library returns the contract itself.
    executor = open_executor(engine, ray_address=ray_address, workers=workers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", register_command.AlreadyRegisteredWarning)
        contract = register_command.register(
            source,
            name=name,
            format=format,
            schema=schema,
            registry=registry,
            description=description,
            owners=owner or (),
            key=key or (),
            workers=workers,
            scan_pii=scan_pii,
            write_roles=write_roles,
            allow_breaking=allow_breaking,
            engine=executor,
            storage_options=storage_options(storage_option),
            progress=progress_for(json_output),
        )
    reused = [w for w in caught if issubclass(w.category, register_command.AlreadyRegisteredWarning)]
    for w in caught:
        if w not in reused:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    proposals = None
    if infer_roles and not write_roles:
        proposals = register_command.propose_roles(
            contract, registry=registry, storage_options=storage_options(storage_option)
        )
    if json_output:
        from dsm.hashing.fingerprint_kernel import provenance

        # How the fingerprints were computed rides beside the contract (not part of it: same digests).
        if proposals is None:
            print_json({**contract.to_dict(), "provenance": provenance()})
        else:
            print_json(
                {
                    "contract": contract.to_dict(),
                    "proposed_roles": [p.to_dict() for p in proposals],
                    "provenance": provenance(),
                }
            )
        return
    fp = contract.fingerprint
    if reused:
        console.print(
            f"{esc(contract.ref)} already holds exactly these shards (same bytes, rows and schema): nothing "
            "new was registered",
            highlight=False,
        )
    else:
        console.print(
            f"registered [bold]{esc(contract.ref)}[/]: {len(contract.shards)} {esc(contract.format)} shards, "
            f"{contract.total_rows:,} rows, {human_bytes(contract.total_bytes)}"
            + (f", fingerprint {fp.unordered}" if fp else ""),
            highlight=False,
        )
    ran = engine_line(executor.report())
    if ran:
        console.print(f"  {esc(ran)}", highlight=False)
    ignored = contract.metadata.get("ignored_files") or []
    if ignored:
        count = int(contract.metadata.get("ignored_count") or len(ignored))
        shown = ", ".join(str(f["path"]) for f in ignored[:3]) + (
            f" (and {count - 3} more)" if count > 3 else ""
        )
        console.print(f"  ignored {count} file(s) that are not data: {shown}", markup=False, highlight=False)
    if scan_pii:
        _render_pii_scan(contract.metadata.get("pii_scan") or {})
    if write_roles:
        written = [f"{f.name}: {f.role}" for f in contract.schema.fields if f.role]
        console.print("roles in the contract: " + (", ".join(written) or "none found"), highlight=False)
    for proposal in proposals or ():
        media = f" ({proposal.media_type})" if proposal.media_type else ""
        console.print(
            f"  proposed role for {proposal.field}: {proposal.role}{media}, from {proposal.evidence}",
            markup=False,  # plain text: nothing in it is read as markup
            highlight=False,
        )
    if proposals is not None:
        console.print(
            "roles proposed, not written: register again with --write-roles to write them"
            if proposals
            else "no roles proposed",
            highlight=False,
        )


_PII_WORDS = {"email": "e-mail addresses", "phone": "phone numbers", "card": "payment card numbers (Luhn)"}


def _render_pii_scan(scan: dict[str, Any]) -> None:
    """The warnings of ``--scan-pii``: counts per field and kind (the scan keeps no value)."""
    findings = scan.get("findings") or []
    if not findings:
        console.print(f"  pii scan: nothing found in {scan.get('rows', 0):,} sampled rows")
        return
    for f in findings:
        what = _PII_WORDS.get(f["kind"], f["kind"])
        console.print(
            f"  [bold yellow]warning:[/] field {esc(f['field'])}: {f['count']:,} of {f['sampled']:,} sampled "
            f"values look like {what}: classify it (classification: pii, with --schema) or check the data",
            highlight=False,
        )


def add_to(app: typer.Typer) -> None:
    app.command(epilog=_EPILOG)(register)
