"""Field roles: what a column means to a person looking at rows, and how to propose roles for a new dataset.

A contract field may carry ``role`` (one of :data:`ROLES`), ``media_type`` and ``classification``. Roles
decide how a value is shown: ``text`` as long text with its length and line count, ``messages`` as a chat
thread, ``image``/``audio``/``video`` by their media facts, ``json`` parsed and folded, and the RL roles
(``episode``, ``step``, ``observation``, ``action``, ``reward``, ``done``, ``terminated``, ``truncated``)
as steps of episodes (see :mod:`dsm.inspect.episodes`).

:func:`infer_roles` proposes roles from field names and a sample of values; ``dsm register --infer-roles``
shows the proposals and ``--write-roles`` writes them into the contract.

>>> import pyarrow as pa
>>> table = pa.table({"reward": [0.5], "done": [True], "prompt_text": ["hi"]})
>>> [(p.field, p.role) for p in infer_roles(table)]
[('reward', 'reward'), ('done', 'done')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dsm.inspect.media import kind_of, media_type_of_path, sniff

__all__ = [
    "CHAT_ROLES",
    "RL_ROLES",
    "ROLES",
    "RoleProposal",
    "fold_json",
    "infer_roles",
    "parse_messages",
]

RL_ROLES = ("episode", "step", "observation", "action", "reward", "done", "terminated", "truncated")
ROLES = ("text", "messages", "image", "audio", "video", "json", *RL_ROLES)
"""Every role dsm renders; a contract may name others, which are shown by their type."""

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
"""Speaker roles of a ``messages`` turn that dsm knows; others are reported as anomalies."""

_ROLE_KEYS = ("role", "from", "speaker", "author")
_CONTENT_KEYS = ("content", "value", "text")


# ----------------------------------------------------------------------------------------- messages


def _content_text(content: Any) -> tuple[str, list[str]]:
    """The text of a turn's content and marks for its non-text parts (multimodal content lists)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if isinstance(content, list):
        texts, marks = [], []
        for part in content:
            if isinstance(part, Mapping):
                kind = str(part.get("type") or "")
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif kind:
                    marks.append(f"{kind} part")
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts), marks
    return json.dumps(content, ensure_ascii=False, default=str), []


def _tool_calls(turn: Mapping[str, Any]) -> list[str]:
    calls = turn.get("tool_calls") or []
    if isinstance(turn.get("function_call"), Mapping):
        calls = [*calls, {"function": turn["function_call"]}]
    out = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            arguments = function.get("arguments")
            text = arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
            out.append(f"{function.get('name', '?')}({text if len(text) <= 200 else text[:197] + '...'})")
        else:
            out.append(str(call)[:200])
    return out


def parse_messages(value: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The turns of a chat value (a list of ``{role, content}`` structs, or its JSON text) and anomalies.

    Each turn is ``{"role", "content", "kind", "marks"}``: ``kind`` is the speaker role when dsm knows it,
    else ``"other"``; marks note system turns, tool calls, tool results and non-text content parts. Also
    accepted: ShareGPT turns (``from``/``value``) and multimodal content lists.
    """
    anomalies: list[str] = []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            return [], [f"not a chat: not valid JSON ({exc.msg} at position {exc.pos})"]
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        return [], [f"not a chat: expected a list of turns, got {type(value).__name__}"]
    turns: list[dict[str, Any]] = []
    previous: str | None = None
    for number, raw in enumerate(value, start=1):
        if not isinstance(raw, Mapping):
            anomalies.append(f"turn {number} is not a {{role, content}} object")
            continue
        role = next((raw[k] for k in _ROLE_KEYS if raw.get(k) is not None), None)
        role_text = str(role) if role is not None else ""
        content, marks = _content_text(next((raw[k] for k in _CONTENT_KEYS if k in raw), None))
        kind = _speaker(role_text)
        if kind == "other":
            anomalies.append(f"turn {number} has role {role_text!r}, not one of {', '.join(CHAT_ROLES)}")
        if kind == "system":
            marks.insert(0, "system turn")
            if number > 1:
                anomalies.append(f"turn {number} is a system turn after the first turn")
        calls = _tool_calls(raw)
        marks += [f"tool call: {call}" for call in calls]
        if kind in ("tool", "function"):
            marks.insert(
                0, "tool result" + (f" for {raw['tool_call_id']}" if raw.get("tool_call_id") else "")
            )
        if not content.strip() and not calls and not marks:
            anomalies.append(f"turn {number} ({role_text or 'no role'}) has empty content")
        if previous is not None and kind == previous and kind in ("user", "assistant"):
            anomalies.append(f"turns {number - 1} and {number} are both {kind} turns")
        previous = kind
        turn: dict[str, Any] = {"role": role_text, "content": content, "kind": kind, "marks": marks}
        if raw.get("name"):
            turn["name"] = str(raw["name"])
        turns.append(turn)
    if turns and not any(t["kind"] == "assistant" for t in turns):
        anomalies.append("no assistant turn")
    return turns, anomalies


def _speaker(role: str) -> str:
    lowered = role.strip().lower()
    aliases = {"human": "user", "gpt": "assistant", "bot": "assistant", "model": "assistant"}
    lowered = aliases.get(lowered, lowered)
    return lowered if lowered in CHAT_ROLES else "other"


# ----------------------------------------------------------------------------------------------- json


def fold_json(value: Any, *, depth: int = 3, items: int = 20) -> Any:
    """``value`` with what lies deeper than ``depth`` (or past ``items`` entries) folded into a short
    ``"{... 5 keys}"`` / ``"[... 12 items]"`` text: a preview for a screen, not the value itself."""
    if isinstance(value, Mapping):
        if depth <= 0:
            return f"{{... {len(value)} keys}}"
        out = {str(k): fold_json(v, depth=depth - 1, items=items) for k, v in list(value.items())[:items]}
        if len(value) > items:
            out["..."] = f"{len(value) - items} more keys"
        return out
    if isinstance(value, list):
        if depth <= 0:
            return f"[... {len(value)} items]"
        folded = [fold_json(v, depth=depth - 1, items=items) for v in value[:items]]
        if len(value) > items:
            folded.append(f"... {len(value) - items} more items")
        return folded
    return value


def json_shape(value: Any) -> tuple[str, int]:
    """``(kind, depth)`` of a parsed JSON value: ``object with 3 keys`` and how deeply it nests."""

    def depth_of(v: Any) -> int:
        if isinstance(v, Mapping):
            return 1 + max((depth_of(x) for x in v.values()), default=0)
        if isinstance(v, list):
            return 1 + max((depth_of(x) for x in v), default=0)
        return 0

    if isinstance(value, Mapping):
        kind = f"object with {len(value)} key" + ("" if len(value) == 1 else "s")
    elif isinstance(value, list):
        kind = f"array of {len(value)} item" + ("" if len(value) == 1 else "s")
    else:
        kind = type(value).__name__ if value is not None else "null"
    return kind, depth_of(value)


# ------------------------------------------------------------------------------------------ inference


@dataclass(frozen=True, kw_only=True)
class RoleProposal:
    """A role proposed for a field, with the media type found and the evidence, for a person to accept."""

    field: str
    role: str
    media_type: str | None
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "role": self.role,
            "media_type": self.media_type,
            "evidence": self.evidence,
        }


_NAME_ROLES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("reward", re.compile(r"^(rewards?|rew|r)$")),
    ("done", re.compile(r"^(dones?|is_done|is_terminal|terminal)$")),
    ("terminated", re.compile(r"^(terminated|terminateds|is_terminated|terminations?)$")),
    ("truncated", re.compile(r"^(truncated|truncateds|is_truncated|truncations?|timeouts?)$")),
    ("episode", re.compile(r"^(episode|episode_id|episode_index|ep|ep_id|traj(ectory)?_id)$")),
    ("step", re.compile(r"^(step|steps|step_id|step_index|t|timestep|time_step|frame_index)$")),
    ("observation", re.compile(r"^(obs|observations?|states?|obs_\w+)$")),
    ("action", re.compile(r"^(actions?|act)$")),
    ("messages", re.compile(r"^(messages|conversations?|chat|dialog(ue)?|turns)$")),
    ("text", re.compile(r"^(text|content|body|document|article|passage|prompt|completion|response)$")),
)


def _numeric(type_: pa.DataType) -> bool:
    return bool(pa.types.is_integer(type_) or pa.types.is_floating(type_))


def _list_of(type_: pa.DataType) -> pa.DataType | None:
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        return type_.value_type
    return None


def _is_chat_type(type_: pa.DataType) -> bool:
    item = _list_of(type_)
    if item is None or not pa.types.is_struct(item):
        return False
    names = {item.field(i).name for i in range(item.num_fields)}
    return bool(names & set(_ROLE_KEYS)) and bool(names & set(_CONTENT_KEYS))


def _fits(role: str, type_: pa.DataType) -> bool:
    """Whether a role found by name makes sense for the type (a ``text`` named int column does not)."""
    item = _list_of(type_) or type_
    if role == "reward":
        return _numeric(item)
    if role in ("done", "terminated", "truncated"):
        return bool(pa.types.is_boolean(item) or pa.types.is_integer(item))
    if role in ("episode", "step"):
        return bool(
            pa.types.is_integer(type_) or pa.types.is_string(type_) or pa.types.is_large_string(type_)
        )
    if role == "messages":
        return _is_chat_type(type_) or pa.types.is_string(type_) or pa.types.is_large_string(type_)
    if role == "text":
        return bool(pa.types.is_string(type_) or pa.types.is_large_string(type_))
    return True


def _sample_values(column: pa.ChunkedArray, limit: int = 50) -> list[Any]:
    values = [v for v in column.slice(0, limit * 4).to_pylist() if v is not None]
    return values[:limit]


def _propose_by_value(name: str, type_: pa.DataType, values: list[Any]) -> RoleProposal | None:
    if _is_chat_type(type_):
        return RoleProposal(
            field=name, role="messages", media_type=None, evidence="a list of {role, content} structs"
        )
    binary = pa.types.is_binary(type_) or pa.types.is_large_binary(type_)
    if binary and values:
        found = [sniff(v) for v in values]
        kinds: dict[str, int] = {}
        for info in found:
            if info.kind is not None:
                kinds[info.kind] = kinds.get(info.kind, 0) + 1
        if kinds:
            role, count = max(kinds.items(), key=lambda item: item[1])
            if count >= 0.8 * len(found):  # a few broken values (all zeros, empty) do not hide the role
                types = sorted({f.media_type for f in found if f.kind == role and f.media_type})
                return RoleProposal(
                    field=name,
                    role=role,
                    media_type=types[0] if len(types) == 1 else None,
                    evidence=f"{count} of {len(found)} sampled values are {', '.join(types)} bytes",
                )
    texts = pa.types.is_string(type_) or pa.types.is_large_string(type_)
    if texts and values:
        by_path = {media_type_of_path(v) for v in values}
        if len(by_path) == 1 and None not in by_path:
            media_type = next(iter(by_path))
            path_role = kind_of(media_type)
            if path_role is not None:
                return RoleProposal(
                    field=name,
                    role=path_role,
                    media_type=media_type,
                    evidence=f"paths ending in {media_type} names",
                )
        stripped = [v.lstrip() for v in values]
        if all(s.startswith(("{", "[")) for s in stripped):
            try:
                parsed = [json.loads(v) for v in values]
            except json.JSONDecodeError:
                parsed = []
            if parsed:
                if all(isinstance(p, list) and p and _looks_like_chat(p) for p in parsed):
                    return RoleProposal(
                        field=name, role="messages", media_type=None, evidence="JSON lists of {role, content}"
                    )
                return RoleProposal(
                    field=name, role="json", media_type=None, evidence="every sampled value is JSON text"
                )
        long = [v for v in values if len(v) >= 200 or "\n" in v]
        if len(long) * 2 >= len(values):
            return RoleProposal(
                field=name,
                role="text",
                media_type=None,
                evidence=f"{len(long)} of {len(values)} values are long",
            )
    return None


def _looks_like_chat(turns: list[Any]) -> bool:
    return all(isinstance(t, Mapping) and any(k in t for k in _ROLE_KEYS) for t in turns)


def infer_roles(sample: pa.Table, *, known: Mapping[str, str | None] | None = None) -> list[RoleProposal]:
    """Roles proposed for the fields of ``sample`` (a few hundred rows are enough), in field order.

    Values decide first (chat structs, media magic bytes, JSON text, long text), then names (``reward``,
    ``done``, ``episode_id``, ``obs``...), kept only when the type fits the role. Fields named in ``known``
    (a field's declared role) are left as they are.
    """
    known = known or {}
    out = []
    for field in sample.schema:
        if known.get(field.name):
            continue
        values = _sample_values(sample.column(field.name))
        proposal = _propose_by_value(field.name, field.type, values)
        if proposal is None:
            lowered = field.name.lower()
            for role, pattern in _NAME_ROLES:
                if pattern.match(lowered) and _fits(role, field.type):
                    proposal = RoleProposal(
                        field=field.name, role=role, media_type=None, evidence=f"the name {field.name!r}"
                    )
                    break
        if proposal is not None:
            out.append(proposal)
    return out
