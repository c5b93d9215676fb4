"""``dsm policy show | set | check``: parse, call :mod:`dsm.commands.policy`, render."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from dsm.cli import checks_failed
from dsm.cli.options import JsonOpt, RegistryOpt, StorageOpt, storage_options
from dsm.cli.render import console, print_json

if TYPE_CHECKING:
    from dsm.commands.policy import PolicyAudit

__all__ = ["add_to", "check", "policy_app", "set_", "show"]

policy_app = typer.Typer(
    name="policy",
    help="The registry's data policy: where each classification may live, encryption, public access, "
    "retention (docs/policy.md).",
    epilog="Examples:\n\n  dsm policy set policy.yaml\n\n  dsm policy show\n\n  dsm policy check --stores",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


@policy_app.command(epilog="Example:\n\n  dsm policy show --json")
def show(
    registry: RegistryOpt = None, storage_option: StorageOpt = None, json_output: JsonOpt = False
) -> None:
    """Print the registry's policy.yaml (or say it has none)."""
    from dsm.commands import policy as lib

    found = lib.show_policy(registry=registry, storage_options=storage_options(storage_option))
    if json_output:
        print_json(found.to_dict() if found is not None else None)
    elif found is None:
        console.print("this registry has no policy.yaml: data of every classification may go anywhere")
    else:
        console.print(f"# {escape(found.source)}")
        console.print(found.to_yaml(), end="", markup=False, highlight=False)


@policy_app.command(
    name="set",
    epilog="Example:\n\n  dsm policy set policy.yaml --registry s3://registry/\n\n"
    "The file is validated first (JSON Schema, durations, prefixes); an invalid file changes nothing.",
)
def set_(
    source: Annotated[str, typer.Argument(help="The policy YAML file (any fsspec URL).")],
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Validate a policy file and make it the registry's policy.yaml."""
    from dsm.commands import policy as lib

    change = lib.set_policy(source, registry=registry, storage_options=storage_options(storage_option))
    if json_output:
        print_json(change.to_dict())
        return
    rules = len(change.policy.rules) + (1 if change.policy.default is not None else 0)
    console.print(
        f"{'replaced' if change.replaced else 'set'} the policy of {escape(change.registry)}: {rules} rule(s)"
    )


def _render_audit(audit: PolicyAudit) -> None:
    table = Table(title=f"policy {audit.policy}")
    for column in ("version", "classified", "verdict", "rule broken"):
        table.add_column(column)
    for ref, check in audit.checks.items():
        classified = ", ".join(f"{k}: {', '.join(v)}" for k, v in check.classified.items()) or "-"
        if check.ok:
            table.add_row(ref, escape(classified), "[bold green]ok[/]", "")
            continue
        for i, violation in enumerate(check.violations):
            table.add_row(
                ref if i == 0 else "",
                escape(classified) if i == 0 else "",
                "[bold red]violates[/]",
                escape(violation.message),
            )
    console.print(table)


@policy_app.command(
    epilog="Examples:\n\n  dsm policy check\n\n  dsm policy check web-text@prod --stores --json\n\n"
    "Exit codes: 0 every version complies, 1 one does not, 2 bad input (no policy), 3 storage failure."
)
def check(
    refs: Annotated[
        list[str] | None, typer.Argument(help="Versions to check (default: every version not retired).")
    ] = None,
    stores: Annotated[
        bool, typer.Option("--stores", help="Also ask each store about encryption and public access.")
    ] = False,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Check registered versions against the policy: locations (and, with --stores, what stores answer)."""
    from dsm.commands import policy as lib

    audit = lib.check_policy(
        refs or (), stores=stores, registry=registry, storage_options=storage_options(storage_option)
    )
    if json_output:
        print_json(audit.to_dict())
    else:
        _render_audit(audit)
    if not audit.ok:
        checks_failed()


def add_to(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")
