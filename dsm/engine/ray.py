"""The Ray executor: every unit of a job is one Ray core task, run anywhere on a Ray cluster (``dsm[ray]``).

dsm owns the plan; Ray only runs its units (one ``@ray.remote`` task each; never Ray Data, whose seeded
shuffle and file names change from run to run). A unit's output name, bytes and journal record are the
same whichever node runs it and however often, so the files are byte-identical to the local engine's.

What crosses to the workers, and how:

- **The job's function** (a partial over its context: locations, plan, formats) goes into the object store
  once per run; each task's argument is one unit. A :class:`~dsm.storage.Location` crosses as its URL and
  is opened again inside the task (never a pickled filesystem: those break across processes and
  versions).
- **Storage options and credentials** reach the workers through their environment: once per run, the
  driver puts a small environment into the object store (``DSM_STORAGE_OPTIONS`` holding each location's
  options under its URL, and the SDK credential variables set on the driver, :data:`FORWARDED_ENV`) and
  every task applies it to its process before it opens anything, so a location opens in a worker with
  exactly the options it has on the driver. Not through ``runtime_env``: Ray's
  runtime-env agent writes every ``env_vars`` value, credentials included, to its log on every node. Task
  names say which unit runs (``dsm.copy_units``), never a URL or an option.
- **The code**: workers import dsm from their own installation; a task refuses to run (exit 2 on the
  driver) when its dsm or pyarrow version differs from the driver's, since output bytes depend on both.

Retries: a task whose worker or node died is run again by Ray (``max_retries``); a task that raised a
transient storage error (:class:`~dsm.errors.StorageError`, exit 3) too (``retry_exceptions``); a data
failure (a corrupt shard, a fingerprint that differs) is never retried and reaches the caller as the
same exception the local engine raises. The report counts the retries, the nodes that ran units and
their CPUs.

Reaching a cluster: ``address`` (``--ray-address``), else ``RAY_ADDRESS``, else a Ray started on this
machine for the job (``address="local"``: never someone else's cluster found on the machine). A process
already connected to Ray (``ray.init`` by the caller) runs on that connection. Ray Client addresses
(``ray://``) are refused: submit dsm as a Ray job instead (docs/ray.md).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import ray
import ray.exceptions

from dsm import _testing
from dsm._version import __version__
from dsm.engine.base import EngineReport, ErrorPolicy, Mode, UnitFailure, unit_label
from dsm.engine.progress import reporting_to
from dsm.errors import InputError, StorageError
from dsm.storage import Location, location, protocol_of, redact
from dsm.units import parse_workers

__all__ = ["FORWARDED_ENV", "RETRIES", "RayExecutor"]

T = TypeVar("T")
R = TypeVar("R")

RETRIES = 3
"""Attempts Ray makes of a unit after its first, when its worker or node died or it raised a
:class:`~dsm.errors.StorageError`."""

FORWARDED_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
)
"""The variables the storage SDKs read credentials and endpoints from: when set on the driver, the workers
get the same values (over a worker's own). Files such variables point to (profiles, key files) are on
the driver's machine only, so those are not forwarded."""

_OPTIONS_ENV = "DSM_STORAGE_OPTIONS"
_WINDOW_REFRESH_SECONDS = 10.0
_CACHED_JOBS = 4
_LOCAL_PROTOCOLS = ("file", "local")


# --- the driver: what a run ships --------------------------------------------------------------------


@dataclass(frozen=True)
class _Setup:
    """What every task of a run applies before it runs its unit."""

    env: Mapping[str, str]
    point: str | None
    versions: tuple[str, str]


@dataclass(frozen=True)
class _Outcome:
    value: Any
    attempt: int | None
    node: str
    reported: int = 0  # what the unit reported with report_progress, handed on when it finishes


_collecting = threading.local()


def _location_settings(loc: Location) -> tuple[str, bool]:
    """How a Location crosses: its URL (an absolute path on local disk), never its filesystem or options;
    the options are recorded for the run's worker environment."""
    found = getattr(_collecting, "found", None)
    if found is not None:
        found[loc.url] = dict(loc.options)
    return (loc.root if loc.is_local else loc.url), loc.is_local


def _open_location(settings: tuple[str, bool]) -> Location:
    """A Location opened again inside a task from its URL; its options come from the run's environment."""
    return location(settings[0])


@functools.cache
def _versions() -> tuple[str, str]:
    """The versions the output bytes depend on: dsm's and pyarrow's."""
    return __version__, importlib.metadata.version("pyarrow")


def _worker_environment(found: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The environment a run's tasks apply: each location's options under its URL (the driver's view,
    defaults and ``DSM_STORAGE_OPTIONS`` included), and the credential variables set on the driver."""
    keyed: dict[str, Any] = {}
    for url, options in sorted(found.items()):
        if not options or protocol_of(url) in _LOCAL_PROTOCOLS:
            continue
        bad = [key for key, value in options.items() if not _is_json(value)]
        if bad:
            raise InputError(
                f"storage option(s) {', '.join(sorted(bad))} of {redact(url)} are not JSON values, so they "
                "cannot reach Ray workers; give them as --storage-option KEY=JSON, or set them in the "
                "workers' own environment"
            )
        keyed[url] = dict(options)
    env = {name: os.environ[name] for name in FORWARDED_ENV if os.environ.get(name)}
    if keyed:
        env[_OPTIONS_ENV] = json.dumps(keyed, sort_keys=True)
    return env


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# --- the worker: one task runs one unit --------------------------------------------------------------

_cache: OrderedDict[str, Any] = OrderedDict()
_applied: dict[str, Any] = {"key": None, "saved": {}}


def _cached(ref: Any) -> Any:
    """``ray.get(ref)``, deserialised once per worker process (a run's tasks share the worker)."""
    key = ref.hex()
    if key not in _cache:
        _cache[key] = ray.get(ref)
        while len(_cache) > _CACHED_JOBS:
            _cache.popitem(last=False)
    return _cache[key]


def _apply_environment(key: str, env: Mapping[str, str]) -> None:
    """Make ``env`` this worker's environment for the run ``key`` (undoing the previous run's first).

    The run's ``DSM_STORAGE_OPTIONS`` replaces the worker's own while its tasks run: every location a
    unit opens was shipped with the run, so each opens with exactly the options the driver resolved.
    """
    if _applied["key"] == key:
        return
    for name, value in _applied["saved"].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    saved = {name: os.environ.get(name) for name in (*env, _OPTIONS_ENV)}
    os.environ.pop(_OPTIONS_ENV, None)
    os.environ.update(env)
    _applied.update(key=key, saved=saved)


def _attempt_number() -> int | None:
    """Which attempt of its task this is (0: the first), or None where Ray does not say."""
    worker: Any = getattr(getattr(ray, "_private", None), "worker", None)
    core = getattr(getattr(worker, "global_worker", None), "core_worker", None)
    get = getattr(core, "get_current_task_attempt_number", None)
    if get is None:
        return None
    try:
        return int(get())
    except Exception:
        return None


@ray.remote
def _run_unit(refs: list[Any], unit: Any) -> _Outcome:
    """Apply the run's environment, check the code is the driver's, then run one unit."""
    setup_ref, fn_ref = refs
    setup: _Setup = _cached(setup_ref)
    if setup.versions != _versions():
        raise InputError(
            f"a Ray worker runs dsm {_versions()[0]} with pyarrow {_versions()[1]}, the driver dsm "
            f"{setup.versions[0]} with pyarrow {setup.versions[1]}: the same output bytes need the same "
            "code; install the driver's versions on the cluster"
        )
    _apply_environment(setup_ref.hex(), setup.env)  # before the job opens its locations
    _testing.arm_worker(setup.point)
    attempt = _attempt_number()
    _testing.set_attempt(attempt or 0)
    fn = _cached(fn_ref)
    reported = [0]

    def add(nbytes: int) -> None:
        reported[0] += nbytes

    with reporting_to(add):
        value = fn(unit)
    node = ray.get_runtime_context().get_node_id()
    return _Outcome(value=value, attempt=attempt, node=node, reported=reported[0])


# --- the executor --------------------------------------------------------------------------------------


def _port(address: str) -> str:
    return address.rsplit(":", 1)[-1] if ":" in address else ""


@dataclass(kw_only=True)
class RayExecutor:
    """Runs units as Ray tasks on the cluster at ``address`` (None: ``RAY_ADDRESS``, else a local Ray
    started for the job with ``workers`` CPUs). It connects on its first run; ``workers`` caps the units
    in flight (default: twice the cluster's CPUs, so that every CPU always has one waiting)."""

    address: str | None = None
    workers: int | None = None
    name: str = "ray"
    _connected_to: str | None = field(default=None, init=False, repr=False)
    _startup: float = field(default=0.0, init=False, repr=False)
    _retries: int | None = field(default=0, init=False, repr=False)
    _nodes: set[str] = field(default_factory=set, init=False, repr=False)

    @classmethod
    def connect(cls, *, address: str | None = None, workers: int | None = None) -> RayExecutor:
        """An executor for ``address`` (checked now, connected on first use)."""
        if workers is not None:
            parse_workers(workers)  # a whole number in 1..MAX_WORKERS, checked before anything starts
        requested = (address or os.environ.get("RAY_ADDRESS") or "").strip() or None
        if requested is not None and requested.startswith("ray://"):
            raise InputError(
                f"--ray-address {redact(requested)} is a Ray Client address, which dsm does not use: run "
                "dsm on a node of the cluster, or submit it as a Ray job (`ray job submit -- dsm ...`)"
            )
        return cls(address=requested, workers=workers)

    def _connect(self) -> None:
        if self._connected_to is not None:
            return
        started = time.monotonic()
        if _through_ray_client():
            raise InputError(
                "this process reaches Ray through Ray Client (ray://), which dsm does not use: run dsm on a "
                "node of the cluster, or submit it as a Ray job (`ray job submit -- dsm ...`)"
            )
        if ray.is_initialized():
            current = str(ray.get_runtime_context().gcs_address)
            if self.address not in (None, "auto") and _port(self.address or "") != _port(current):
                raise InputError(
                    f"this process is already connected to the Ray cluster at {redact(current)}, not "
                    f"{redact(self.address or '')}: one process reaches one cluster"
                )
            self._connected_to = current
        else:
            quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
            try:
                if self.address is None:
                    ray.init(address="local", num_cpus=self.workers, include_dashboard=False, **quiet)
                    self._connected_to = "local"
                else:
                    ray.init(address=self.address, **quiet)
                    self._connected_to = str(ray.get_runtime_context().gcs_address)
            except (OSError, RuntimeError) as exc:  # ConnectionError and TimeoutError are OSErrors
                why = redact(str(exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if self.address is None:
                    raise StorageError(
                        f"cannot start a local Ray for this command: {why}; give --ray-address (or "
                        "RAY_ADDRESS) of a running cluster, or use --engine local"
                    ) from None
                raise StorageError(
                    f"cannot reach the Ray cluster at {redact(self.address)}: {why}; check --ray-address / "
                    "RAY_ADDRESS, that the cluster is up and, when it uses token authentication, that "
                    "RAY_AUTH_MODE=token is set here (Ray sends its token to an address given explicitly "
                    "only then)"
                ) from None
        ray.util.register_serializer(Location, serializer=_location_settings, deserializer=_open_location)
        self._startup = time.monotonic() - started

    def _ship(self, fn: Callable[[T], R]) -> list[Any]:
        """Put the run's function and its environment into the object store; the tasks' first argument."""
        found: dict[str, Mapping[str, Any]] = {}
        _collecting.found = found
        try:
            fn_ref = ray.put(fn)
        finally:
            _collecting.found = None
        in_memory = sorted(url for url in found if protocol_of(url) == "memory")
        if in_memory:
            raise InputError(
                f"{redact(in_memory[0])} lives in this process's memory, which Ray workers cannot reach: "
                "use --engine local, or a location every node reaches (an object store, a shared disk)"
            )
        setup = _Setup(env=_worker_environment(found), point=_testing.worker_point(), versions=_versions())
        return [ray.put(setup), fn_ref]

    def _window(self) -> int:
        if self.workers:
            return self.workers
        return max(1, 2 * int(ray.cluster_resources().get("CPU", 1)))

    def run(
        self,
        fn: Callable[[T], R],
        units: Sequence[T],
        *,
        workers: int | None = None,
        mode: Mode | None = None,
        on_error: ErrorPolicy = "raise",
        on_done: Callable[[int, R], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[R | UnitFailure]:
        """Every unit's result (or :class:`UnitFailure`) in unit order, as :class:`Executor` promises.
        What a unit reports with :func:`~dsm.engine.progress.report_progress` reaches ``on_progress`` when
        that unit finishes (a task's progress does not cross to the driver while it runs).

        At most the executor's own ``workers`` (``--workers``) units are in flight: a run's ``workers`` and
        ``mode`` are the local executor's defaults for a kind of work (threads for this machine's I/O, its
        cores), not a cap for a cluster.
        """
        if not units:
            return []
        self._connect()
        refs = self._ship(fn)
        task = _run_unit.options(
            name="dsm." + unit_label(fn, None),
            num_cpus=1,
            max_retries=RETRIES,
            retry_exceptions=[StorageError],
            scheduling_strategy="SPREAD",
        )
        results: list[Any] = [None] * len(units)
        pending: dict[Any, int] = {}
        following = 0
        window, refreshed = self._window(), time.monotonic()
        try:
            while following < len(units) or pending:
                while following < len(units) and len(pending) < window:
                    pending[task.remote(refs, units[following])] = following
                    following += 1
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    index = pending.pop(ref)
                    try:
                        outcome: _Outcome = ray.get(ref)
                    except Exception as exc:
                        error = _failure(exc, fn, units[index], index)
                        if on_error == "raise":
                            raise error from None
                        results[index] = UnitFailure(index=index, error=error)
                        continue
                    self._count(outcome)
                    if on_progress is not None and outcome.reported:
                        on_progress(outcome.reported)
                    results[index] = outcome.value
                    if on_done is not None:
                        on_done(index, outcome.value)
                if time.monotonic() - refreshed > _WINDOW_REFRESH_SECONDS:  # the cluster may have grown
                    window, refreshed = self._window(), time.monotonic()
        except BaseException:
            for ref in pending:
                ray.cancel(ref)  # not force: a running unit stops as on Ctrl-C, removing its partial file
            raise
        return results

    def _count(self, outcome: _Outcome) -> None:
        self._nodes.add(outcome.node)
        if outcome.attempt is None or self._retries is None:
            self._retries = None
        else:
            self._retries += outcome.attempt

    def report(self) -> EngineReport:
        """The cluster, the nodes that ran units and their CPUs, and the retries counted so far."""
        cpus = 0
        if self._nodes and ray.is_initialized():
            for node in ray.nodes():
                if node.get("NodeID") in self._nodes:
                    cpus += int(node.get("Resources", {}).get("CPU", 0))
        return EngineReport(
            engine=self.name,
            address=redact(self._connected_to) if self._connected_to else None,
            nodes=len(self._nodes),
            cpus=cpus,
            retries=self._retries,
            startup_seconds=self._startup,
        )


def _through_ray_client() -> bool:
    try:
        from ray.util.client import ray as client
    except ImportError:
        return False
    return bool(client.is_connected())


def _failure(exc: Exception, fn: Callable[..., Any], unit: Any, index: int) -> BaseException:
    """The exception a failed task stands for: the unit's own (a data failure, a storage error that
    outlived its retries), as the local engine raises it; else a StorageError saying what Ray saw."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
            return cause
    what = unit_label(fn, unit)
    first = redact(str(exc)).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, ray.exceptions.OutOfMemoryError):
        hint = "Ray's memory monitor killed it: give the workers more memory, or run fewer units at once"
    elif isinstance(exc, ray.exceptions.TaskCancelledError):
        hint = "it was cancelled"
    else:
        hint = f"its worker died and {RETRIES} retries did not finish it"
    return StorageError(
        f"unit {index} ({what}) did not finish on the Ray cluster: {hint} ({type(exc).__name__}: {first}); "
        "what was done is kept: run the same command again to resume"
    )
