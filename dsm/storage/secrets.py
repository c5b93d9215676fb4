"""Credentials never appear in what dsm prints, logs or writes: :func:`redact` hides them in text and
:func:`public_url` drops them from a URL that is kept (contracts, journals)."""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

__all__ = ["URL_USERINFO", "public_url", "redact", "remember_option_secrets", "remember_secret"]

# Option names whose values are credentials: split on "_" / "-", any of these words marks a secret.
_SECRET_WORDS = {
    "secret",
    "password",
    "passwd",
    "token",
    "key",
    "credential",
    "credentials",
    "sas",
    "sig",
    "signature",
    "connection",
    "conn",
}
_NOT_SECRET = {"signature_version", "key_prefix", "sse_kms_key_id", "requester_pays"}
URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:\s]*):(?P<pw>[^/@\s]+)@", re.I)
# Query parameters of SAS tokens and presigned URLs that grant access (only after "?" or "&").
_QUERY_SECRET_NAMES = (
    "sig", "se", "sp", "sv", "st", "spr", "srt", "ss", "skoid", "sktid", "skt", "ske", "sks", "skv",
    "token", "key", "code", "x-amz-signature", "x-amz-credential", "x-amz-security-token", "awsaccesskeyid",
    "signature",
)  # fmt: skip
_QUERY_SECRET = re.compile(
    r"(?P<k>(?<=[?&])(?:" + "|".join(map(re.escape, _QUERY_SECRET_NAMES)) + r")=)(?P<v>[^&\s\"']+)", re.I
)
_CONN_SECRET = re.compile(
    r"(?P<k>(?:AccountKey|SharedAccessSignature|SharedAccessKey|Password|Pwd)=)(?P<v>[^;\s\"']+)", re.I
)
# Environment variables where the SDKs read credentials from: their values are hidden too.
_SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CLIENT_SECRET",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON",
)
_MIN_SECRET = 8  # shorter values cannot be real credentials, and hiding them would mangle ordinary words

_registered_secrets: set[str] = set()


def remember_secret(value: str) -> None:
    """Make :func:`redact` hide this exact value wherever it appears (option values, environment)."""
    if value and len(value) >= _MIN_SECRET:
        _registered_secrets.add(value)
        for part in _CONN_SECRET.finditer(value):  # a connection string's key on its own, too
            if len(part["v"]) >= _MIN_SECRET:
                _registered_secrets.add(part["v"])


def _remember_env_secrets() -> None:
    for name in _SECRET_ENV:
        value = os.environ.get(name)
        if value:
            remember_secret(value)


def redact(text: str) -> str:
    """Replace credentials in ``text`` with ``***``.

    Hidden: passwords in URLs (``s3://user:***@...``), SAS and presigned-URL query parameters, keys in
    connection strings, every value given in a secret-named storage option, and the values of the
    environment variables the SDKs read credentials from.

    >>> redact("az://c/p?sv=2024&sig=abcd1234")
    'az://c/p?sv=***&sig=***'
    """
    _remember_env_secrets()
    text = URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m['k']}***", text)
    text = _CONN_SECRET.sub(lambda m: f"{m['k']}***", text)
    for secret in sorted(_registered_secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def public_url(url: str) -> str:
    """``url`` without any credential in it, still usable as an address (for contracts and journals).

    Userinfo with a password is dropped and secret query parameters are removed; the credentials belong
    in the environment or in storage options, not in a contract.

    >>> public_url("s3://AKIA:secret@bucket/data?versionId=3")
    's3://bucket/data?versionId=3'
    """
    if "://" not in url:
        return url
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        netloc = host if ":" in userinfo else netloc
    query = "&".join(
        pair
        for pair in parts.query.split("&")
        if pair and pair.partition("=")[0].lower() not in _QUERY_SECRET_NAMES
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _is_secret_option(key: str) -> bool:
    name = key.lower()
    return name not in _NOT_SECRET and bool(set(re.split(r"[_\-.]", name)) & _SECRET_WORDS)


def remember_option_secrets(options: Mapping[str, Any]) -> None:
    for key, value in options.items():
        if isinstance(value, str) and _is_secret_option(str(key)):
            remember_secret(value)
        elif isinstance(value, Mapping):
            remember_option_secrets(value)
