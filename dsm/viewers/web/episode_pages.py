"""RL pages: every episode of a dataset (``/d/REF/episodes``) and one episode step by step
(``/d/REF/episode?id=E``): observations (images as a strip), actions, rewards plotted, the terminal step
marked, with a slider and a play button.

Episodes, their layouts and anomalies are the inspect layer's (:mod:`dsm.inspect.episodes`); this module only
arranges the rows of one episode as steps and lays out the reward plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from dsm.errors import DatasetNotFound, InputError
from dsm.inspect import EpisodeSummary, RowSource
from dsm.inspect.view import FieldView, RowPage, as_number, plain
from dsm.viewers.web import links
from dsm.viewers.web.cells import cut_cell, is_media
from dsm.viewers.web.http import Page, Refused, query_int
from dsm.viewers.web.state import ServerState

__all__ = ["MAX_EPISODES", "MAX_STEPS", "episode_page", "episodes_page", "reward_plot"]

MAX_EPISODES = 500
MAX_STEPS = 500
"""Steps of one episode on one page (longer episodes page with ``offset``)."""


def _source(request: Request, state: ServerState) -> tuple[RowSource, str]:
    source = state.opened(request.path_params["ref"])
    ref = f"{source.contract.name}@{source.contract.version}"
    layout = source.episode_layout
    if layout is None:
        raise DatasetNotFound(
            f"{ref} has no RL fields (roles reward, done, terminated, truncated): no episodes to show"
        )
    masked = [name for name in layout.columns if source.policy.is_masked(name)]
    if masked:
        raise Refused(
            f"{ref}: RL field {masked[0]!r} is classified and masked; episodes are shown only by a server "
            f"started with --unmask {masked[0]} (audited)"
        )
    return source, ref


def episodes_page(request: Request, state: ServerState) -> Page:
    """Every episode: length, return, terminal step, anomalies; ``anomalies=1`` for the wrong ones only."""
    source, ref = _source(request, state)
    params = request.query_params
    only = params.get("anomalies") in ("1", "true", "yes")
    every = source.episodes()
    chosen = [e for e in every if e.anomalies] if only else list(every)
    length = query_int(params, "length", 100, minimum=1, maximum=MAX_EPISODES)
    offset = query_int(params, "offset", 0, maximum=len(chosen))
    shown = chosen[offset : offset + length]
    data = {
        "dataset": ref,
        "layout": source.episode_layout.to_dict() if source.episode_layout else None,
        "total": len(every),
        "anomalous": sum(1 for e in every if e.anomalies),
        "anomalies_only": only,
        "offset": offset,
        "length": length,
        "matching": len(chosen),
        "episodes": [dict(e.to_dict(), link=links.episode_url(ref, plain(e.episode))) for e in shown],
        "links": {
            "previous": links.episodes_url(ref, max(0, offset - length), only) if offset else None,
            "next": links.episodes_url(ref, offset + length, only) if offset + length < len(chosen) else None,
        },
    }
    return Page(template="episodes.html", title=f"{ref} episodes", data=data)


def _by_role(fields: Sequence[FieldView], role: str) -> str | None:
    return next((f.name for f in fields if f.role == role), None)


def _steps_of_rows(
    page: RowPage, summary: EpisodeSummary, fields: Mapping[str, str | None], ref: str, first_index: int
) -> list[dict[str, Any]]:
    views = {f.name: f.to_dict() for f in page.fields}
    steps: list[dict[str, Any]] = []
    episode_field = fields.get("episode")
    for row in page.rows:
        cells = {c.field: c for c in row.cells}
        if (
            episode_field
            and episode_field in cells
            and plain(cells[episode_field].value) != plain(summary.episode)
        ):
            continue  # a row of another episode between this one's first and last rows
        step: dict[str, Any] = {"index": first_index + len(steps), "position": row.position}
        for role in ("step", "reward", "done", "terminated", "truncated"):
            name = fields.get(role)
            step[role] = plain(cells[name].value) if name and name in cells else None
        for role in ("observation", "action"):
            name = fields.get(role)
            cell = cells.get(name) if name else None
            if cell is None:
                step[role] = None
                continue
            media = is_media(cell.to_dict(), views[cell.field])
            step[role] = {
                "summary": cell.summary,
                "kind": cell.kind,
                "value": cut_cell(cell.to_dict(), chars=120, items=16).get("value"),
                "media": links.media_url(ref, row.position, cell.field) if media else None,
                "media_kind": media,
            }
        step["anomalies"] = [a for c in row.cells for a in c.anomalies]
        steps.append(step)
    return steps


def _steps_of_lists(
    page: RowPage, fields: Mapping[str, str | None], offset: int, count: int
) -> list[dict[str, Any]]:
    """The ``list`` layout: one row holds the episode, each RL column a list of its steps."""
    row = page.rows[0]
    cells = {c.field: c for c in row.cells}

    def values(role: str) -> list[Any] | None:
        name = fields.get(role)
        value = cells[name].value if name and name in cells else None
        return value if isinstance(value, list) else None

    columns = {
        role: values(role)
        for role in ("step", "reward", "done", "terminated", "truncated", "observation", "action")
    }
    length = max((len(v) for v in columns.values() if v is not None), default=0)
    steps = []
    for index in range(offset, min(length, offset + count)):
        step: dict[str, Any] = {"index": index, "position": row.position}
        for role in ("step", "reward", "done", "terminated", "truncated"):
            found = columns[role]
            step[role] = found[index] if found is not None and index < len(found) else None
        for role in ("observation", "action"):
            found = columns[role]
            value = found[index] if found is not None and index < len(found) else None
            step[role] = (
                None
                if value is None
                else {"summary": str(value)[:120], "kind": role, "value": value, "media": None}
            )
        step["anomalies"] = []
        steps.append(step)
    return steps


def reward_plot(
    steps: Sequence[Mapping[str, Any]], terminal: int | None, *, width: int = 720, height: int = 180
) -> dict[str, Any]:
    """Points of the reward line (SVG coordinates), NaN steps, the terminal step's x and the axis range."""
    pad_x, pad_y = 44, 16
    rewards = [as_number(s.get("reward")) for s in steps]
    finite = [r for r in rewards if r is not None and math.isfinite(r)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    count = max(len(steps) - 1, 1)

    def x_of(i: int) -> float:
        return round(pad_x + (width - 2 * pad_x) * i / count, 2)

    def y_of(v: float) -> float:
        return round(height - pad_y - (height - 2 * pad_y) * (v - low) / (high - low), 2)

    segments: list[list[str]] = [[]]
    nans = []
    for i, r in enumerate(rewards):
        if r is None or not math.isfinite(r):
            if r is not None:
                nans.append(x_of(i))
            segments.append([])
            continue
        segments[-1].append(f"{x_of(i)},{y_of(r)}")
    first_index = int(steps[0]["index"]) if steps else 0
    terminal_x = None
    if terminal is not None and steps and first_index <= terminal < first_index + len(steps):
        terminal_x = x_of(terminal - first_index)
    return {
        "width": width,
        "height": height,
        "lines": [" ".join(s) for s in segments if s],
        "dots": [
            {"x": x_of(i), "y": y_of(r)} for i, r in enumerate(rewards) if r is not None and math.isfinite(r)
        ],
        "nan_x": nans,
        "terminal_x": terminal_x,
        "low": low,
        "high": high,
        "x0": x_of(0),
        "x1": x_of(count),
        "top": pad_y,
        "bottom": height - pad_y,
        "xs": [x_of(i) for i in range(len(steps))],
    }


def _summary(source: RowSource, text: str) -> EpisodeSummary:
    for summary in source.episodes():
        if str(plain(summary.episode)) == text:
            return summary
    raise DatasetNotFound(f"{source.ref} has no episode {text[:60]!r}; /episodes lists them")


def episode_page(request: Request, state: ServerState) -> Page:
    """One episode, step by step (at most 500 steps a page: ``offset`` for the next)."""
    source, ref = _source(request, state)
    params = request.query_params
    if "id" not in params:
        raise InputError("give id=EPISODE (the episodes page links each)")
    summary = _summary(source, params["id"])
    layout = source.episode_layout
    assert layout is not None  # checked by _source
    fields = {
        "episode": layout.episode,
        "step": layout.step,
        "reward": layout.reward,
        "done": layout.done,
        "terminated": layout.terminated,
        "truncated": layout.truncated,
        "observation": _by_role(source.fields, "observation"),
        "action": _by_role(source.fields, "action"),
    }
    length = query_int(params, "length", MAX_STEPS, minimum=1, maximum=MAX_STEPS)
    if layout.layout == "list":
        offset = query_int(params, "offset", 0, maximum=max(summary.length - 1, 0))
        page = source.take(
            [summary.first_position], selection={"kind": "episode", "episode": plain(summary.episode)}
        )
        steps = _steps_of_lists(page, fields, offset, length)
        span = summary.length
    else:
        span = summary.last_position - summary.first_position + 1
        offset = query_int(params, "offset", 0, maximum=max(span - 1, 0))
        page = source.read(summary.first_position + offset, min(length, span - offset))
        steps = _steps_of_rows(page, summary, fields, ref, offset)
    episode_id = plain(summary.episode)
    ids = [plain(e.episode) for e in source.episodes()]
    at = ids.index(episode_id)
    data = {
        "dataset": ref,
        "episode": summary.to_dict(),
        "layout": layout.to_dict(),
        "fields": fields,
        "offset": offset,
        "length": length,
        "steps": steps,
        "page": page.to_dict(),
        "links": {
            "previous_episode": links.episode_url(ref, ids[at - 1]) if at > 0 else None,
            "next_episode": links.episode_url(ref, ids[at + 1]) if at + 1 < len(ids) else None,
            "episodes": links.episodes_url(ref),
            "earlier_steps": f"{links.episode_url(ref, episode_id)}&offset={max(0, offset - length)}"
            if offset
            else None,
            "later_steps": f"{links.episode_url(ref, episode_id)}&offset={offset + length}"
            if offset + length < span
            else None,
        },
    }
    return Page(
        template="episode.html",
        title=f"{ref} episode {episode_id}",
        data=data,
        context={"plot": reward_plot(steps, summary.terminal_step)},
    )
