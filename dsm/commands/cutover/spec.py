"""What a cutover does, fixed when it is created: :class:`CutoverSpec`, the journal's ``created`` record.

Every option is checked, the source resolved and the alias found before anything is written
(:meth:`CutoverSpec.build`); the stages read the spec back from the journal (:meth:`CutoverSpec.from_dict`),
so a resumed run does exactly what the first was asked to. ``to_dict`` is the record's ``spec``, key for key
(``dsm-cutover-journal-v1``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsm._version import tool_name
from dsm.commands.cutover.prices import PriceTable, load_prices
from dsm.commands.storage_check import resolve_checks
from dsm.contract import Contract
from dsm.errors import InputError
from dsm.formats import get_format
from dsm.registry import Registry, parse_reference
from dsm.rewrite.plan import check_shard_count
from dsm.rewrite.spec import RewriteSpec
from dsm.storage import public_url, redact
from dsm.units import parse_duration, parse_number, parse_rate, parse_workers

__all__ = ["CutoverSpec", "ShadowGates"]


@dataclass(frozen=True, kw_only=True)
class ShadowGates:
    """The shadow stage's gates (``dsm bench --compare`` old against new) and its row sample."""

    max_regression: float | None = None
    max_p99: float | None = None
    min_throughput: float | None = None
    sample_rows: int = 1000
    shadow_duration: float = 2.0
    shadow_workers: tuple[int, ...] = (1,)

    @classmethod
    def build(
        cls,
        *,
        max_regression: float | None,
        max_p99: float | None,
        min_throughput: float | str | None,
        sample_rows: int,
        shadow_duration: float,
        shadow_workers: int | str | Sequence[int],
    ) -> ShadowGates:
        """The gates from the options as given (``"200MB/s"``, ``"1,4"``), each checked."""
        return cls(
            max_regression=None
            if max_regression is None
            else parse_number(max_regression, "max_regression", minimum=0),
            max_p99=None if max_p99 is None else parse_number(max_p99, "max_p99", minimum=0, inclusive=False),
            min_throughput=None if min_throughput is None else parse_rate(min_throughput),
            sample_rows=int(parse_number(sample_rows, "sample_rows", minimum=0)),
            shadow_duration=parse_number(shadow_duration, "shadow_duration", minimum=0, inclusive=False),
            shadow_workers=parse_workers(shadow_workers),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_regression": self.max_regression,
            "max_p99": self.max_p99,
            "min_throughput": self.min_throughput,
            "sample_rows": self.sample_rows,
            "shadow_duration": self.shadow_duration,
            "shadow_workers": list(self.shadow_workers),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShadowGates:
        return cls(
            max_regression=data.get("max_regression"),
            max_p99=data.get("max_p99"),
            min_throughput=data.get("min_throughput"),
            sample_rows=int(data["sample_rows"]),
            shadow_duration=float(data["shadow_duration"]),
            shadow_workers=tuple(int(w) for w in data["shadow_workers"]),
        )


@dataclass(frozen=True, kw_only=True)
class CutoverSpec:
    """A cutover of ``dataset@alias`` from ``source_version`` to a copy at ``destination``, written as
    ``rewrite`` says (its format always set), with the shadow ``gates``, the hooks, the retain period and
    the price table it was planned with."""

    dataset: str
    alias: str
    source_version: int
    source: str
    requested: str
    destination: str
    rewrite: RewriteSpec
    retain: str
    retain_seconds: float
    delete_old: bool
    postpone_switch: bool
    on_stage: tuple[str, ...]
    gates: ShadowGates
    allow_breaking: bool
    prices: Mapping[str, Any]
    measure_seconds: float
    tool: str
    skip_readiness: tuple[str, ...] = ()
    """Readiness checks of the destination that may fail without stopping the plan."""

    @property
    def format(self) -> str:
        return str(self.rewrite.format)

    @property
    def operation(self) -> str:
        return self.rewrite.operation

    def price_table(self) -> PriceTable:
        return PriceTable.from_dict(self.prices, source=str(self.prices.get("source", "journal")))

    def to_dict(self) -> dict[str, Any]:
        """The ``spec`` of the journal's ``created`` record."""
        return {
            "dataset": self.dataset,
            "alias": self.alias,
            "source_version": self.source_version,
            "source": self.source,
            "requested": self.requested,
            "destination": self.destination,
            "format": self.format,
            "operation": self.operation,
            "rewrite": self.rewrite.to_dict(),
            "retain": self.retain,
            "retain_seconds": self.retain_seconds,
            "delete_old": self.delete_old,
            "postpone_switch": self.postpone_switch,
            "on_stage": list(self.on_stage),
            "gates": self.gates.to_dict(),
            "allow_breaking": self.allow_breaking,
            "prices": dict(self.prices),
            "measure_seconds": self.measure_seconds,
            "tool": self.tool,
            "readiness": {"skip": list(self.skip_readiness)},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CutoverSpec:
        """The spec a journal recorded."""
        return cls(
            dataset=str(data["dataset"]),
            alias=str(data["alias"]),
            source_version=int(data["source_version"]),
            source=str(data.get("source", "")),
            requested=str(data.get("requested", "")),
            destination=str(data["destination"]),
            rewrite=RewriteSpec.from_dict(
                data["rewrite"], operation=str(data["operation"]), format=str(data["format"])
            ),
            retain=str(data.get("retain", "")),
            retain_seconds=float(data.get("retain_seconds") or 0.0),
            delete_old=bool(data.get("delete_old")),
            postpone_switch=bool(data.get("postpone_switch")),
            on_stage=tuple(str(c) for c in data.get("on_stage") or ()),
            gates=ShadowGates.from_dict(data["gates"]),
            allow_breaking=bool(data.get("allow_breaking")),
            prices=dict(data["prices"]),
            measure_seconds=float(data.get("measure_seconds") or 1.0),
            tool=str(data.get("tool", "")),
            skip_readiness=tuple(str(c) for c in (data.get("readiness") or {}).get("skip") or ()),
        )

    @classmethod
    def build(
        cls,
        reg: Registry,
        ref: str,
        *,
        destination: str,
        format: str | None,
        rewrite: Mapping[str, Any],
        alias: str | None,
        prices: str | None,
        retain: str | float,
        delete_old: bool,
        postpone_switch: bool,
        on_stage: Sequence[str],
        gates: Mapping[str, Any],
        allow_breaking: bool,
        measure_seconds: float,
        skip_readiness: Sequence[str] = (),
        storage_options: Mapping[str, Any] | None,
    ) -> tuple[CutoverSpec, Contract]:
        """Every option checked, the source resolved and the alias found: the spec and the source.

        ``rewrite`` holds the rewrite's keywords (layout, shuffle, write options) and ``gates`` the
        shadow's (:meth:`ShadowGates.build`), checked in their turn."""
        if "/" in ref or ref.endswith((".yaml", ".yml")):
            raise InputError(
                f"{ref!r}: a cutover moves a registered dataset; give NAME@ALIAS (e.g. web-text@prod)"
            )
        name, selector = parse_reference(ref)
        source = reg.resolve(ref)
        if alias is None:
            if selector is None or selector.isdigit() or selector == "latest":
                raise InputError(
                    f"{ref!r} names no alias: give the alias readers use, e.g. {name}@prod or --alias prod"
                )
            alias = selector
        aliases = reg.aliases(name)
        if alias not in aliases:
            raise InputError(
                f"{name} has no alias {alias!r} (aliases: {sorted(aliases) or 'none'}); a cutover moves the "
                "alias "
                f"readers use: `dsm alias {name} {alias} {source.version}` first"
            )
        if aliases[alias] != source.version:
            raise InputError(
                f"{name}@{alias} points at {aliases[alias]}, not at {source.ref}: a cutover moves an alias "
                "from the "
                f"version it points at; start from {name}@{alias}"
            )
        if source.status == "retired":
            raise InputError(f"{source.ref} is retired (its data was deleted); it cannot be moved")
        if source.fingerprint is None:
            raise InputError(f"{source.ref} has no row fingerprint to prove the copy against; re-register it")
        if public_url(destination) != destination or redact(destination) != destination:
            raise InputError(
                "--to holds a credential; give the destination without it and the credential through the "
                "environment or --storage-option (a journal never stores one)"
            )
        # Against every version of every dataset (the source among them) and the registry, compared as
        # canonical locations: before anything is written, the plan's sample included.
        reg.catalog(storage_options).refuse_destination(destination, doing=f"cutover of {source.ref}")
        target_format = format or source.format
        get_format(target_format)  # an unknown name fails here, before anything is written
        layout = ("num_shards", "shard_size", "rows_per_shard")
        resharding = (
            any(rewrite.get(k) is not None for k in layout)
            or rewrite.get("shuffle")
            or rewrite.get("seed") is not None
        )
        writing = {
            k: rewrite.get(k)
            for k in ("compression", "compression_level", "row_group_size", "format_options")
        }
        if resharding:
            if rewrite.get("num_shards") is not None:  # the plan's layout would refuse it: say so at start
                check_shard_count(rewrite["num_shards"], source.total_rows or 0, what=source.ref)
            rewrite_spec = RewriteSpec.reshard(
                **{k: rewrite.get(k) for k in (*layout, "seed")},
                shuffle=bool(rewrite.get("shuffle")),
                format=target_format,
                command="a resharding cutover",
                **writing,
            )
        else:
            rewrite_spec = RewriteSpec.convert(format=target_format, **writing)
        hooks = tuple(str(c) for c in on_stage)
        for command in hooks:
            if redact(command) != command:
                raise InputError(
                    "an --on-stage command holds a credential, which the journal would keep: read it from "
                    "the environment inside the hook instead"
                )
            if not command.strip():
                raise InputError("an --on-stage command is empty")
        table = load_prices(prices, storage_options=storage_options)
        shadow = ShadowGates.build(**gates)
        skipped = resolve_checks(skip_readiness, what="--skip-readiness")
        spec = cls(
            dataset=name,
            alias=alias,
            source_version=source.version or 0,
            source=source.ref,
            requested=ref,
            destination=destination,
            rewrite=rewrite_spec,
            retain=str(retain),
            retain_seconds=parse_duration(retain),
            delete_old=bool(delete_old),
            postpone_switch=bool(postpone_switch),
            on_stage=hooks,
            gates=shadow,
            allow_breaking=bool(allow_breaking),
            prices=table.to_dict(),
            measure_seconds=parse_number(measure_seconds, "measure_seconds", minimum=0, inclusive=False),
            tool=tool_name(),
            skip_readiness=skipped,
        )
        return spec, source
