"""The data policy of a registry: where each classification of data may live, and how it must be kept.

``policy.yaml`` at the root of a registry (validated against ``policy.schema.json``; docs/policy.md)::

    policy: 1
    classifications:
      pii:
        allowed_locations: [s3://secure-data/, /srv/secure/]
        require_encryption: true
        block_public_access: true
        retention: 30d
    default:
      allowed_locations: []

A dataset's classifications are the ``classification`` tags of its contract's fields. Each has the rule of
its name, else ``default``; a classification with neither is refused everywhere (a tag nobody wrote a
rule for is a question, not a permission). Unclassified fields are not restricted. Locations compare as
canonical values (:mod:`dsm.storage.canonical`): symlinks, ``s3a://`` and trailing slashes do not matter,
and a prefix matches on a path boundary (``s3://b/data`` allows ``s3://b/data/x``, not ``s3://b/data2``).

This module is the model and the location rule. What a store reports about encryption and public access
comes from ``dsm storage check``; the commands layer joins the two (``dsm.commands.policy``).

>>> p = Policy.from_dict({"policy": 1, "classifications": {"pii": {"allowed_locations": ["memory://ok"]}}})
>>> [v.rule for v in p.location_violations({"pii": ("email",)}, "memory://elsewhere/x")]
['classifications.pii.allowed_locations']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from dsm import json_schema
from dsm.contract import check_contract_size, load_yaml
from dsm.errors import ContractError, InputError
from dsm.storage import Location, canonical_url, is_within, protocol_of, public_url, redact
from dsm.units import parse_duration

__all__ = [
    "POLICY_FILE",
    "POLICY_FORMAT_VERSION",
    "Policy",
    "PolicyRule",
    "PolicyViolation",
    "carry_classifications",
    "classified_fields",
    "policy_json_schema",
    "read_policy",
]

POLICY_FILE = "policy.yaml"
POLICY_FORMAT_VERSION = 1
# The readiness check (``dsm storage check``) each storage requirement of a rule is judged by.
ENCRYPTION_CHECK = "encryption"
PUBLIC_ACCESS_CHECK = "public-access"


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema ``policy.yaml`` is validated against."""
    return json_schema.schema("policy")


def classified_fields(schema: Any) -> dict[str, tuple[str, ...]]:
    """``{classification: (field, ...)}`` of a contract :class:`~dsm.contract.Schema`, in field order."""
    found: dict[str, list[str]] = {}
    for f in schema.fields:
        if f.classification:
            found.setdefault(f.classification, []).append(f.name)
    return {k: tuple(v) for k, v in found.items()}


def carry_classifications(given: Any, previous: Any) -> Any:
    """The annotations a new version of a dataset gets: those of ``given`` (a :class:`~dsm.contract.Schema`
    or None), with the classification of every same-named field of ``previous`` (the dataset's newest
    version) that ``given`` leaves unclassified. A tag once given to a field is carried to every version."""
    if previous is None:
        return given
    from dataclasses import replace

    from dsm.contract import Schema

    tags = {f.name: f for f in previous.fields if f.classification}
    if given is None:
        return Schema(fields=tuple(tags.values())) if tags else None
    merged = []
    for f in given.fields:
        carried = tags.get(f.name)
        merged.append(
            replace(f, classification=carried.classification) if carried and not f.classification else f
        )
    known = {f.name for f in merged}
    merged += [f for name, f in tags.items() if name not in known]
    return Schema(fields=tuple(merged), key=given.key)


@dataclass(frozen=True, kw_only=True)
class PolicyViolation:
    """One rule a dataset or destination breaks: ``rule`` is its path in policy.yaml
    (``classifications.pii.allowed_locations``), ``message`` says what and what to do."""

    rule: str
    classification: str
    fields: tuple[str, ...]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "classification": self.classification,
            "fields": list(self.fields),
            "message": self.message,
        }


@dataclass(frozen=True, kw_only=True)
class PolicyRule:
    """The rule of one classification (or ``default``). ``allowed_locations`` None: anywhere."""

    name: str
    path: str
    allowed_locations: tuple[str, ...] | None = None
    require_encryption: bool = False
    block_public_access: bool = False
    retention: str | None = None
    retention_seconds: float = 0.0
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        if self.allowed_locations is not None:
            out["allowed_locations"] = list(self.allowed_locations)
        if self.require_encryption:
            out["require_encryption"] = True
        if self.block_public_access:
            out["block_public_access"] = True
        if self.retention is not None:
            out["retention"] = self.retention
        return out

    @classmethod
    def from_dict(cls, name: str, path: str, data: Mapping[str, Any], source: str) -> PolicyRule:
        prefixes = data.get("allowed_locations")
        if prefixes is not None:
            for i, prefix in enumerate(prefixes):
                where = f"{source}: field {path}.allowed_locations[{i}]"
                if public_url(prefix) != prefix or redact(prefix) != prefix:
                    raise ContractError(f"{where}: holds a credential; a policy names locations only")
                if "://" not in prefix and not prefix.startswith("/"):
                    raise ContractError(f"{where}: {prefix!r} is relative; give a URL or an absolute path")
        retention = data.get("retention")
        seconds = 0.0
        if retention is not None:
            try:
                seconds = parse_duration(retention, what=f"{path}.retention")
            except InputError as exc:
                raise ContractError(f"{source}: field {exc}") from None
        return cls(
            name=name,
            path=path,
            allowed_locations=tuple(prefixes) if prefixes is not None else None,
            require_encryption=bool(data.get("require_encryption", False)),
            block_public_access=bool(data.get("block_public_access", False)),
            retention=str(retention) if retention is not None else None,
            retention_seconds=seconds,
            description=data.get("description"),
        )

    def allows(self, canonical: str, storage_options: Mapping[str, Any] | None = None) -> bool:
        """Whether the canonical location ``canonical`` is under one of the allowed prefixes."""
        if self.allowed_locations is None:
            return True
        scheme = canonical.partition("://")[0]
        for prefix in self.allowed_locations:
            if _family(protocol_of(prefix)) != scheme:
                continue  # another store: no need to reach its backend
            if is_within(canonical, canonical_url(prefix, storage_options)):
                return True
        return False


def _family(protocol: str) -> str:
    return {"s3a": "s3", "abfs": "az", "abfss": "az", "adl": "az", "gcs": "gs", "local": "file"}.get(
        protocol, protocol
    )


@dataclass(frozen=True, kw_only=True)
class Policy:
    """A registry's data policy: a rule per classification and an optional ``default`` rule."""

    rules: Mapping[str, PolicyRule] = field(default_factory=dict)
    default: PolicyRule | None = None
    description: str | None = None
    source: str = "<policy>"

    def rule_for(self, classification: str) -> PolicyRule | None:
        """The rule that governs ``classification``: its own, else ``default``, else None (refused)."""
        return self.rules.get(classification) or self.default

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": POLICY_FORMAT_VERSION}
        if self.description:
            out["description"] = self.description
        out["classifications"] = {name: rule.to_dict() for name, rule in self.rules.items()}
        if self.default is not None:
            out["default"] = self.default.to_dict()
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<policy>") -> Policy:
        """Validate ``data`` (the parsed YAML) against the policy schema; errors name the field."""
        import fastjsonschema

        if not isinstance(data, Mapping):
            raise ContractError(f"{source}: a policy is a YAML mapping with 'policy: 1'")
        if data.get("policy") != POLICY_FORMAT_VERSION:
            raise ContractError(
                f"{source}: field policy: expected 1 (the policy format version this dsm reads), "
                f"got {data.get('policy')!r}"
            )
        try:
            json_schema.validator("policy")(dict(data))
        except fastjsonschema.JsonSchemaValueException as error:
            where = ".".join(str(p) for p in (error.path or [])[1:]) or "(top level)"
            message = error.message.removeprefix(str(error.name)).strip() if error.name else error.message
            raise ContractError(f"{source}: field {where}: {message}") from None
        rules = {
            str(name): PolicyRule.from_dict(str(name), f"classifications.{name}", rule, source)
            for name, rule in (data.get("classifications") or {}).items()
        }
        default = data.get("default")
        return cls(
            rules=rules,
            default=PolicyRule.from_dict("default", "default", default, source)
            if default is not None
            else None,
            description=data.get("description"),
            source=source,
        )

    @classmethod
    def from_yaml(cls, text: str | bytes, *, source: str = "<policy>") -> Policy:
        """Parse (bounded: :func:`dsm.contract.load_yaml`) and validate a policy; errors name ``source``."""
        return cls.from_dict(load_yaml(text, source=source), source=source)

    # --- judging ---------------------------------------------------------------------------------------

    def unruled(self, classified: Mapping[str, Iterable[str]]) -> list[PolicyViolation]:
        """Classifications that have no rule (and no ``default``): refused wherever they go."""
        return [
            PolicyViolation(
                rule=f"classifications.{name}",
                classification=name,
                fields=tuple(fields),
                message=(
                    f"policy {self.source}: classification {name!r} (field(s) {', '.join(fields)}) has no "
                    f"rule and the policy has no default rule; add classifications.{name} to the policy"
                ),
            )
            for name, fields in classified.items()
            if self.rule_for(name) is None
        ]

    def location_violations(
        self,
        classified: Mapping[str, Iterable[str]],
        url: str,
        storage_options: Mapping[str, Any] | None = None,
    ) -> list[PolicyViolation]:
        """The rules that forbid storing data of these classifications (``{classification: fields}``) at
        ``url``; ``[]`` when every rule allows it."""
        found = self.unruled(classified)
        canonical = canonical_url(url, storage_options)
        for name, fields in classified.items():
            rule = self.rule_for(name)
            if rule is None or rule.allows(canonical, storage_options):
                continue
            allowed = ", ".join(rule.allowed_locations or ()) or "nowhere"
            fields = tuple(fields)
            found.append(
                PolicyViolation(
                    rule=f"{rule.path}.allowed_locations",
                    classification=name,
                    fields=fields,
                    message=(
                        f"policy rule {rule.path}.allowed_locations ({self.source}): {name} data "
                        f"(field(s) {', '.join(fields)}) may be stored only under {allowed}; "
                        f"{redact(url)} is not; choose an allowed location or change the policy"
                    ),
                )
            )
        return found

    def storage_requirements(self, classified: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
        """The readiness checks the rules of these classifications require to pass at a destination:
        ``{"encryption": ["classifications.pii.require_encryption"], ...}``."""
        needs: dict[str, list[str]] = {}
        for name in classified:
            rule = self.rule_for(name)
            if rule is None:
                continue
            if rule.require_encryption:
                needs.setdefault(ENCRYPTION_CHECK, []).append(f"{rule.path}.require_encryption")
            if rule.block_public_access:
                needs.setdefault(PUBLIC_ACCESS_CHECK, []).append(f"{rule.path}.block_public_access")
        return needs

    def retention_for(self, classified: Mapping[str, Iterable[str]]) -> tuple[float, str | None]:
        """The longest retention (seconds) the rules of these classifications ask for, and its rule."""
        best, which = 0.0, None
        for name in classified:
            rule = self.rule_for(name)
            if rule is not None and rule.retention_seconds > best:
                best, which = rule.retention_seconds, f"{rule.path}.retention"
        return best, which


def read_policy(registry_location: Location) -> Policy | None:
    """The policy in ``policy.yaml`` at the root of a registry, or None when it has none."""
    if not registry_location.exists(POLICY_FILE):
        return None
    source = redact(registry_location.url_of(POLICY_FILE))
    check_contract_size(registry_location.size(POLICY_FILE), source)
    raw = registry_location.read_bytes(POLICY_FILE)
    return Policy.from_yaml(raw, source=source)
