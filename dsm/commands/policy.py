"""The data policy of a registry: ``dsm policy show | set | check``, and the check every write path runs.

The policy (``policy.yaml`` at the registry's root, :mod:`dsm.policy`, docs/policy.md) says per
classification where data may be stored, whether the store must encrypt it at rest and block public
access, and how long it is kept. It is enforced where data moves, before anything is written:

- ``dsm register``: the dataset's location (:func:`check_location`, with the store's own answers about
  encryption and public access, read-only);
- ``dsm convert-format`` / ``dsm reshard`` / ``dsm cutover plan``: the destination
  (:func:`check_destination`; encryption and public access come from ``dsm storage check``);
- ``dsm gc``: the retention of each classification (:mod:`dsm.commands.lifecycle`).

>>> check_policy(registry="s3://registry/").ok  # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsm.contract import Schema, check_contract_size
from dsm.errors import InputError
from dsm.policy import (
    POLICY_FILE,
    Policy,
    PolicyViolation,
    classified_fields,
    read_policy,
)
from dsm.registry import Registry, open_registry
from dsm.storage import compare_and_swap, location, redact
from dsm.storage.readiness import Finding, probe_for

if TYPE_CHECKING:
    from dsm.commands.storage_check import ReadinessReport

__all__ = [
    "PolicyAudit",
    "PolicyChange",
    "PolicyCheck",
    "check_destination",
    "check_location",
    "check_policy",
    "policy_error",
    "set_policy",
    "show_policy",
]


@dataclass(frozen=True, kw_only=True)
class PolicyCheck:
    """The policy's verdict on storing one dataset at one location.

    ``classified`` is ``{classification: fields}``; ``required_checks`` the readiness checks its rules
    require (``{"encryption": ["classifications.pii.require_encryption"]}``) and ``answers`` what the
    store said to each; ``violations`` the rules broken (empty: allowed). ``policy`` is None when the
    registry has no policy (everything is allowed)."""

    url: str
    policy: str | None
    classified: Mapping[str, tuple[str, ...]]
    violations: tuple[PolicyViolation, ...] = ()
    required_checks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    answers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "policy": self.policy,
            "ok": self.ok,
            "classified": {k: list(v) for k, v in self.classified.items()},
            "violations": [v.to_dict() for v in self.violations],
            "required_checks": {k: list(v) for k, v in self.required_checks.items()},
            "answers": {k: dict(v) for k, v in self.answers.items()},
        }


def policy_error(check: PolicyCheck, what: str) -> InputError:
    """The error a write path raises for a check that did not pass: the first rule broken, in full."""
    first = check.violations[0]
    more = f" (and {len(check.violations) - 1} more rule(s))" if len(check.violations) > 1 else ""
    return InputError(f"{what} refused by the data policy: {first.message}{more}; nothing was written")


def _storage_violations(
    policy: Policy,
    classified: Mapping[str, tuple[str, ...]],
    url: str,
    answers: Mapping[str, Finding | Any],
) -> list[PolicyViolation]:
    out = []
    needs = policy.storage_requirements(classified)
    wording = {"encryption": "encryption at rest", "public-access": "public access blocked"}
    for check, rules in needs.items():
        answer = answers.get(check)
        if answer is not None and answer.status == "pass":
            continue
        for rule in rules:
            name = rule.split(".")[1] if rule.startswith("classifications.") else "default"
            fields = classified.get(name) or tuple(f for fs in classified.values() for f in fs)
            said = f"{answer.status}: {answer.detail}" if answer is not None else "not checked"
            out.append(
                PolicyViolation(
                    rule=rule,
                    classification=name,
                    fields=tuple(fields),
                    message=(
                        f"policy rule {rule} ({policy.source}): data of field(s) {', '.join(fields)} needs "
                        f"{wording[check]}; {redact(url)} answers {check} {said}"
                    ),
                )
            )
    return out


def _judge(
    schema: Schema,
    url: str,
    registry: str | Registry | None,
    storage_options: Mapping[str, Any] | None,
    ask: Callable[[Mapping[str, list[str]], bool], Mapping[str, Any]],
) -> PolicyCheck:
    """The verdict of the registry's policy on data of ``schema`` at ``url``. ``ask(needs, refused)``
    returns the store's answers (``{check: an object with status and detail}``) to the readiness checks
    the rules need; ``refused`` says the location itself is already not allowed."""
    reg = open_registry(registry, storage_options)
    policy = read_policy(reg.location)
    classified = classified_fields(schema)
    if policy is None or not classified:
        return PolicyCheck(url=redact(url), policy=policy.source if policy else None, classified=classified)
    violations = policy.location_violations(classified, url, storage_options)
    needs = policy.storage_requirements(classified)
    answers = ask(needs, bool(violations)) if needs else {}
    violations += _storage_violations(policy, classified, url, answers)
    return PolicyCheck(
        url=redact(url),
        policy=policy.source,
        classified=classified,
        violations=tuple(violations),
        required_checks={k: tuple(v) for k, v in needs.items()},
        answers={k: {"status": a.status, "detail": a.detail} for k, a in answers.items()},
    )


def check_location(
    schema: Schema,
    url: str,
    *,
    sample: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PolicyCheck:
    """The policy's verdict on data of ``schema`` already stored at ``url`` (``dsm register``): the
    allowed locations, and what the store answers (read-only) about encryption and public access;
    ``sample`` is a file under ``url`` the store is asked about (its encryption)."""

    def ask(needs: Mapping[str, list[str]], refused: bool) -> dict[str, Finding]:
        loc = location(url, storage_options)
        probe = probe_for(loc)
        found = {}
        if "encryption" in needs:
            found["encryption"] = probe.encryption(loc, sample)
        if "public-access" in needs:
            found["public-access"] = probe.public_access(loc)
        return found

    return _judge(schema, url, registry, storage_options, ask)


def check_destination(
    schema: Schema,
    url: str,
    *,
    readiness: ReadinessReport | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PolicyCheck:
    """The policy's verdict on writing data of ``schema`` to ``url`` (a rewrite's or a cutover's
    destination), before anything is written. Encryption and public access are judged by ``dsm storage
    check`` (``readiness``, when the caller already ran it; else only the checks the rules need are run,
    under the check's own scratch prefix, which it removes; not at all where the location is refused)."""

    def ask(needs: Mapping[str, list[str]], refused: bool) -> dict[str, Any]:
        report = readiness
        if report is None and not refused:
            from dsm.commands.storage_check import storage_check

            report = storage_check(
                url, checks=list(needs), require=list(needs), storage_options=storage_options
            )
        return {c.name: c for c in report.checks} if report is not None else {}

    return _judge(schema, url, registry, storage_options, ask)


# ------------------------------------------------------------------------------------------- commands


def show_policy(
    *, registry: str | Registry | None = None, storage_options: Mapping[str, Any] | None = None
) -> Policy | None:
    """The registry's policy, or None when it has none."""
    return read_policy(open_registry(registry, storage_options).location)


@dataclass(frozen=True, kw_only=True)
class PolicyChange:
    """A policy written into a registry: from where, and whether it replaced one."""

    registry: str
    source: str
    replaced: bool
    policy: Policy

    def to_dict(self) -> dict[str, Any]:
        return {
            "registry": self.registry,
            "source": self.source,
            "replaced": self.replaced,
            "policy": self.policy.to_dict(),
        }


def set_policy(
    source: str,
    *,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PolicyChange:
    """Validate the policy file ``source`` and make it the registry's ``policy.yaml`` (replaced only if
    nobody changed it since it was read: ConflictError otherwise). Nothing is written if it is invalid.

    >>> set_policy("policy.yaml", registry="s3://registry/")  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    parent, _, name = str(source).rstrip("/").rpartition("/")
    src = location(parent or ".", storage_options)
    if not src.exists(name):
        raise InputError(f"policy file {redact(source)} does not exist")
    check_contract_size(src.size(name), redact(source))
    text = src.read_bytes(name)
    Policy.from_yaml(text, source=redact(source))  # refused, and nothing written, when invalid
    current = reg.location.read_bytes(POLICY_FILE) if reg.location.exists(POLICY_FILE) else None
    compare_and_swap(reg.location, POLICY_FILE, current, text)
    return PolicyChange(
        registry=redact(reg.url),
        source=redact(source),
        replaced=current is not None,
        policy=Policy.from_yaml(text, source=redact(reg.location.url_of(POLICY_FILE))),
    )


@dataclass(frozen=True, kw_only=True)
class PolicyAudit:
    """Every version checked against the policy: ``checks`` by version ref."""

    policy: str | None
    checks: Mapping[str, PolicyCheck]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "ok": self.ok,
            "versions": {ref: c.to_dict() for ref, c in self.checks.items()},
        }


def check_policy(
    refs: Sequence[str] = (),
    *,
    stores: bool = False,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PolicyAudit:
    """Check registered versions against the policy (``refs``; default every version that is not retired):
    their locations, and with ``stores`` what each store answers about encryption and public access."""
    reg = open_registry(registry, storage_options)
    policy = read_policy(reg.location)
    if policy is None:
        raise InputError(f"registry {redact(reg.url)} has no {POLICY_FILE}; `dsm policy set FILE` adds one")
    contracts = (
        [reg.resolve(r) for r in refs]
        if refs
        else [
            c
            for name in reg.names()
            for v in reg.versions(name)
            if (c := reg.get(name, v)).status != "retired"
        ]
    )
    checks = {}
    for contract in contracts:
        if stores:
            sample = contract.shards[0].path if contract.shards else None
            checks[contract.ref] = check_location(
                contract.schema,
                contract.location,
                sample=sample,
                registry=reg,
                storage_options=storage_options,
            )
        else:
            classified = classified_fields(contract.schema)
            checks[contract.ref] = PolicyCheck(
                url=redact(contract.location),
                policy=policy.source,
                classified=classified,
                violations=tuple(policy.location_violations(classified, contract.location, storage_options)),
            )
    return PolicyAudit(policy=policy.source, checks=checks)
