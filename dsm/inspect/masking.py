"""Which fields this inspect session may show: a field with a ``classification`` is masked unless unmasked.

A masked value is shown as ``***`` with its length (characters of text, bytes of binary, items of a list),
never its content. The policy is fixed when a :class:`dsm.inspect.RowSource` opens; unmasking a field is an
explicit argument, checked here (it must name a classified field) and audited in the registry by
:func:`dsm.inspect.open_rows` before any row is read.

>>> from dsm.contract import Field, Schema
>>> email = Field(name="email", type="string", classification="pii")
>>> schema = Schema(fields=(Field(name="id", type="int64"), email))
>>> policy = MaskPolicy.of(schema)
>>> policy.masked, masked_length("ada@example.com")
(('email',), 15)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsm.contract import Schema
from dsm.errors import InputError

__all__ = ["MASK", "MaskPolicy", "masked_length"]

MASK = "***"


def masked_length(value: Any) -> int | None:
    """The length shown beside a masked value: characters, bytes, items; digits of other scalars."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray, list, tuple, dict)):
        return len(value)
    return len(str(value))


@dataclass(frozen=True, kw_only=True)
class MaskPolicy:
    """The classified fields of a schema (name -> classification) and those unmasked for this session."""

    classified: Mapping[str, str]
    unmasked: tuple[str, ...] = ()

    @classmethod
    def of(cls, schema: Schema, unmask: Iterable[str] = ()) -> MaskPolicy:
        """The policy of ``schema``; every name in ``unmask`` must be a classified field of it."""
        classified = {f.name: f.classification for f in schema.fields if f.classification}
        wanted = tuple(dict.fromkeys(unmask))
        for name in wanted:
            if name not in schema.names:
                raise InputError(f"--unmask {name}: no such field (fields: {', '.join(schema.names)})")
            if name not in classified:
                raise InputError(f"--unmask {name}: the field has no classification; it is never masked")
        return cls(classified=classified, unmasked=wanted)  # type: ignore[arg-type]

    @property
    def masked(self) -> tuple[str, ...]:
        """The fields whose values are hidden, in schema order."""
        return tuple(name for name in self.classified if name not in self.unmasked)

    def is_masked(self, name: str) -> bool:
        return name in self.classified and name not in self.unmasked

    def text(self, name: str, value: Any) -> str:
        """``value`` as it may be printed (in a message or a query echo): ``***`` when masked."""
        return MASK if self.is_masked(name) else repr(value)
