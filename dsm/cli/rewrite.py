"""``dsm convert-format`` and ``dsm reshard``: parse options, make one library call, render the result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from dsm.cli.options import (
    CompressionOpt,
    DeprecatedToFormatOpt,
    EngineOpt,
    FormatOptionOpt,
    JsonOpt,
    LevelOpt,
    NumShardsOpt,
    RayAddressOpt,
    RefArg,
    RegistryOpt,
    RowGroupOpt,
    RowsPerShardOpt,
    SeedOpt,
    ShardSizeOpt,
    ShuffleOpt,
    SpillDirOpt,
    StorageOpt,
    TargetFormatOpt,
    WorkersOpt,
    deprecated_format_spelling,
    key_value_options,
    storage_options,
)
from dsm.cli.render import console, engine_line, esc, human_bytes, print_json, progress_for
from dsm.errors import InputError

if TYPE_CHECKING:
    from dsm.commands.rewrite import RewriteResult

__all__ = ["add_to", "convert_format", "reshard"]

NameOpt = Annotated[
    str | None,
    typer.Option("--name", help="Register the output under this name (default: the source's name)."),
]
OverwriteOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Write into a destination that is not empty (files dsm did not write are kept, never deleted).",
    ),
]
ReadBackOpt = Annotated[
    bool,
    typer.Option(
        "--read-back",
        help="Prove each written file by reading it back as a reader will (slower; also catches a writer "
        "that changes a value). Default: prove from the rows handed to the writer and the bytes written.",
    ),
]


def _render(result: RewriteResult, json_output: bool) -> None:
    if json_output:
        print_json(result.to_dict())
        return
    contract = result.contract
    fp = contract.fingerprint
    resumed = f", {result.units_resumed} kept from an interrupted run" if result.units_resumed else ""
    console.print(
        f"wrote [bold]{esc(result.dataset)}[/] from {esc(result.source)}: {result.shards} "
        f"{esc(contract.format)} shards, {result.rows:,} rows, {human_bytes(result.bytes)} at "
        f"{esc(result.location)}{resumed}",
        highlight=False,
    )
    if fp is not None:
        which = "unordered" if result.parameters.get("shuffle") else "unordered and ordered"
        console.print(
            f"  row fingerprint {fp.unordered} matches {esc(result.source)} ({which})", highlight=False
        )
    ran = engine_line(result.engine)
    if ran:
        console.print(f"  {esc(ran)}", highlight=False)
    for note in result.notes:
        console.print(f"  {esc(note)}", highlight=False)


_CONVERT_EPILOG = (
    "Examples:\n\n  dsm convert-format logs@2 s3://bucket/logs/v3/ --format parquet --compression zstd\n\n"
    "  dsm convert-format web-text data/web-text-jsonl/ --format jsonl --compression gzip --json\n\n"
    "  dsm convert-format logs@2 s3://bucket/logs/v3/ --format parquet --engine ray\n\n"
    "One output file per source shard (part-00000-of-00064.parquet ...). The output is registered as the "
    "next version of the dataset once its row fingerprint is proven equal to the source's. Run the same "
    "command again after a crash to resume. The old spelling --to FORMAT still works until dsm 0.3.\n\n"
    "Exit codes: 0 done and proven, 1 a source shard or the fingerprint failed its check, 2 bad input "
    "(the format cannot hold the schema, the destination holds other files), 3 storage failure."
)


def convert_format(
    ref: RefArg,
    dest: Annotated[
        str, typer.Argument(help="Destination folder (any fsspec URL); empty, or this rewrite's.")
    ],
    format: Annotated[
        str | None,
        typer.Option("--format", help="Target format: parquet, jsonl, csv, arrow, webdataset (required)."),
    ] = None,
    to: DeprecatedToFormatOpt = None,
    compression: CompressionOpt = None,
    compression_level: LevelOpt = None,
    row_group_size: RowGroupOpt = None,
    format_option: FormatOptionOpt = None,
    name: NameOpt = None,
    workers: WorkersOpt = None,
    overwrite: OverwriteOpt = False,
    read_back: ReadBackOpt = False,
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Rewrite a dataset in another format without changing one row, and register it."""
    from dsm.commands import rewrite as rewrite_commands  # imported on use: Arrow loads only when needed

    target = deprecated_format_spelling(format, to, "dsm convert-format")
    if target is None:
        raise InputError("dsm convert-format needs --format FORMAT (parquet, jsonl, csv, arrow, webdataset)")
    result = rewrite_commands.convert_format(
        ref,
        dest,
        format=target,
        compression=compression,
        compression_level=compression_level,
        row_group_size=row_group_size,
        format_options=key_value_options(format_option, "--format-option"),
        name=name,
        workers=workers,
        overwrite=overwrite,
        read_back=read_back,
        engine=engine,
        ray_address=ray_address,
        registry=registry,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    _render(result, json_output)


_RESHARD_EPILOG = (
    "Examples:\n\n  dsm reshard web-text@3 s3://bucket/web-text/v4/ --num-shards 64\n\n"
    "  dsm reshard web-text data/web-text-256mb/ --shard-size 256MB --format parquet --compression zstd\n\n"
    "  dsm reshard web-text data/web-text-shuffled/ --rows-per-shard 100000 --shuffle --seed 7 --json\n\n"
    "  dsm reshard web-text@3 s3://bucket/web-text/v5/ --num-shards 4096 --shuffle --seed 7 --engine ray "
    "--spill-dir s3://scratch/dsm/\n\n"
    "Exactly one of --num-shards, --shard-size, --rows-per-shard. Without --shuffle the files, read in "
    "order, hold the rows in the source's order; with it, a seeded global shuffle (the same seed gives the "
    "same files). --shard-size is a target: rows per file are planned from a sample encoded in the target "
    "format. Run the same command again after a crash to resume. The old spelling --to FORMAT still works "
    "until dsm 0.3.\n\n"
    "Exit codes: 0 done and proven, 1 a source shard or the fingerprint failed its check, 2 bad input, "
    "3 storage failure."
)


def reshard(
    ref: RefArg,
    dest: Annotated[
        str, typer.Argument(help="Destination folder (any fsspec URL); empty, or this rewrite's.")
    ],
    num_shards: NumShardsOpt = None,
    shard_size: ShardSizeOpt = None,
    rows_per_shard: RowsPerShardOpt = None,
    shuffle: ShuffleOpt = False,
    seed: SeedOpt = None,
    format: TargetFormatOpt = None,
    to: DeprecatedToFormatOpt = None,
    compression: CompressionOpt = None,
    compression_level: LevelOpt = None,
    row_group_size: RowGroupOpt = None,
    format_option: FormatOptionOpt = None,
    name: NameOpt = None,
    workers: WorkersOpt = None,
    overwrite: OverwriteOpt = False,
    read_back: ReadBackOpt = False,
    spill_dir: SpillDirOpt = None,
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Rewrite a dataset as other shards (count, size or rows; optionally shuffled) and register it."""
    from dsm.commands import rewrite as rewrite_commands

    result = rewrite_commands.reshard(
        ref,
        dest,
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        format=deprecated_format_spelling(format, to, "dsm reshard"),
        compression=compression,
        compression_level=compression_level,
        row_group_size=row_group_size,
        format_options=key_value_options(format_option, "--format-option"),
        name=name,
        workers=workers,
        overwrite=overwrite,
        read_back=read_back,
        spill_dir=spill_dir,
        engine=engine,
        ray_address=ray_address,
        registry=registry,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    _render(result, json_output)


def add_to(app: typer.Typer) -> None:
    app.command(name="convert-format", epilog=_CONVERT_EPILOG)(convert_format)
    app.command(epilog=_RESHARD_EPILOG)(reshard)
