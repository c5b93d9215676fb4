"""Episodes of RL data: length, return, where the terminal flag fires, and what looks wrong.

Fields with RL roles (``episode``, ``step``, ``reward``, ``done``, ``terminated``, ``truncated``; see
:mod:`dsm.inspect.roles`) describe one of three layouts:

- ``list``: one row per episode, its steps in list columns (``reward: list<float>``, ``done: list<bool>``);
- ``rows``: one row per step, rows of an episode sharing its ``episode`` id, ordered by ``step``;
- ``stream``: one row per step and no episode id: an episode ends at the step whose terminal flag is true.

Anomalies reported per episode: no terminal step (the episode never ends), a terminal flag before the last
step, NaN or null rewards, steps out of order, repeated or skipped step numbers.

>>> import pyarrow as pa
>>> layout = EpisodeLayout(layout="rows", episode="ep", reward="r", done="d")
>>> tracker = EpisodeTracker(layout)
>>> steps = {"ep": [0, 0, 1, 1], "r": [1.0, 2.0, 0.5, 0.5], "d": [False, True, False, False]}
>>> tracker.add(pa.table(steps), 0)
>>> [(e.episode, e.length, e.total_reward, e.anomalies) for e in tracker.finish()]
[(0, 2, 3.0, ()), (1, 2, 1.0, ('no terminal step: the episode never ends',))]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dsm.inspect.view import FieldView, column_values, plain

__all__ = ["LAYOUTS", "EpisodeLayout", "EpisodeSummary", "EpisodeTracker"]

LAYOUTS = ("list", "rows", "stream")
_TERMINALS = ("done", "terminated", "truncated")


@dataclass(frozen=True, kw_only=True)
class EpisodeSummary:
    """One episode. ``terminal_step`` is the 0-based step (within the episode) where a terminal flag is
    first true, or None; positions are the dataset rows it spans (one row in the ``list`` layout)."""

    episode: Any
    first_position: int
    last_position: int
    length: int
    total_reward: float | None
    terminal_step: int | None
    terminated: bool
    truncated: bool
    anomalies: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode": plain(self.episode),
            "first_position": self.first_position,
            "last_position": self.last_position,
            "length": self.length,
            "return": plain(self.total_reward),
            "terminal_step": self.terminal_step,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "anomalies": list(self.anomalies),
        }


@dataclass(frozen=True, kw_only=True)
class EpisodeLayout:
    """Which layout the RL fields of a dataset make, and which field holds each role."""

    layout: str
    episode: str | None = None
    step: str | None = None
    reward: str | None = None
    done: str | None = None
    terminated: str | None = None
    truncated: str | None = None

    @classmethod
    def of(cls, fields: Sequence[FieldView]) -> EpisodeLayout | None:
        """The layout of these fields, or None when none has a reward or terminal role."""
        by_role: dict[str, FieldView] = {}
        for f in fields:
            if f.role and f.role not in by_role:
                by_role[f.role] = f
        if not ({"reward", *_TERMINALS} & set(by_role)):
            return None
        listed = any(
            by_role[r].type.startswith(("list<", "large_list<", "fixed_size_list<"))
            for r in ("reward", *_TERMINALS)
            if r in by_role
        )
        layout = "list" if listed else ("rows" if "episode" in by_role else "stream")
        names = {r: by_role[r].name for r in ("episode", "step", "reward", *_TERMINALS) if r in by_role}
        return cls(layout=layout, **names)

    @property
    def columns(self) -> list[str]:
        """The fields an episode summary reads."""
        names = [self.episode, self.step, self.reward, self.done, self.terminated, self.truncated]
        return [n for n in names if n is not None]

    @property
    def terminal_fields(self) -> list[str]:
        return [n for n in (self.done, self.terminated, self.truncated) if n is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "episode": self.episode,
            "step": self.step,
            "reward": self.reward,
            "done": self.done,
            "terminated": self.terminated,
            "truncated": self.truncated,
        }


@dataclass
class _Episode:
    """What is known about one episode so far (mutable, private to the tracker)."""

    episode: Any
    first_position: int
    last_position: int = -1
    length: int = 0
    total: float = 0.0
    has_reward: bool = False
    nan_steps: list[int] = field(default_factory=list)
    nan_count: int = 0
    null_rewards: int = 0
    terminal_step: int | None = None
    terminal_count: int = 0
    terminated: bool = False
    truncated: bool = False
    last_step: Any = None
    max_step: Any = None
    terminal_at_step: Any = None
    out_of_order: list[str] = field(default_factory=list)
    repeated: int = 0
    skipped: int = 0

    def summary(self) -> EpisodeSummary:
        anomalies: list[str] = []
        if self.terminal_count == 0:
            anomalies.append("no terminal step: the episode never ends")
        else:
            last = self.length - 1
            before_end = (
                self.terminal_at_step != self.max_step
                if self.terminal_at_step is not None and self.max_step is not None
                else self.terminal_step is not None and self.terminal_step < last
            )
            if before_end:
                anomalies.append(
                    f"a terminal flag at step {self.terminal_step} of {self.length}, before the last step"
                )
        if self.nan_count:
            more = f" ({self.nan_count} NaN rewards)" if self.nan_count > 1 else ""
            anomalies.append(f"reward is NaN at step {self.nan_steps[0]}{more}")
        if self.null_rewards:
            anomalies.append(f"{self.null_rewards} step(s) have no reward (null)")
        if self.out_of_order:
            anomalies.append(f"steps out of order: {self.out_of_order[0]}")
        if self.repeated:
            anomalies.append(f"{self.repeated} repeated step number(s)")
        if self.skipped:
            anomalies.append(f"{self.skipped} step number(s) skipped")
        total = (float("nan") if self.nan_count else self.total) if self.has_reward else None
        return EpisodeSummary(
            episode=self.episode,
            first_position=self.first_position,
            last_position=self.last_position,
            length=self.length,
            total_reward=total,
            terminal_step=self.terminal_step,
            terminated=self.terminated,
            truncated=self.truncated,
            anomalies=tuple(anomalies),
        )


def _flags(values: Sequence[Any]) -> np.ndarray:
    return np.array([bool(v) for v in values], dtype=bool)


class EpisodeTracker:
    """Builds :class:`EpisodeSummary` objects from the RL columns of batches read in dataset order.

    With ``wanted`` (episode ids in the ``rows`` layout, dataset positions in the others), only the episodes
    named (or holding those positions) are summarised.
    """

    def __init__(self, layout: EpisodeLayout, *, wanted: Iterable[Any] | None = None) -> None:
        self.layout = layout
        self._wanted = set(wanted) if wanted is not None else None
        self._open: dict[Any, _Episode] = {}
        self._done: list[_Episode] = []
        self._next_index = 0

    # ------------------------------------------------------------------------------------------ adding

    def add(self, table: pa.Table | pa.RecordBatch, first_position: int) -> None:
        """The next rows of the dataset, from ``first_position``; ``table`` holds ``layout.columns``."""
        if table.num_rows == 0:
            return
        columns = {name: column_values(table.column(name)) for name in self.layout.columns}
        if self.layout.layout == "list":
            self._add_lists(columns, first_position, table.num_rows)
        elif self.layout.layout == "rows":
            self._add_rows(columns, first_position, table.num_rows)
        else:
            self._add_stream(columns, first_position, table.num_rows)

    def _steps(
        self, episode: _Episode, columns: Mapping[str, list[Any]], lo: int, hi: int, base: int
    ) -> None:
        """Rows ``lo`` up to ``hi`` of ``columns`` are the next steps of ``episode`` (``base`` is the dataset
        position of row 0)."""
        layout = self.layout
        count = hi - lo
        if layout.reward is not None:
            rewards = columns[layout.reward][lo:hi]
            for offset, value in enumerate(rewards):
                if value is None:
                    episode.null_rewards += 1
                    continue
                episode.has_reward = True
                value = float(value)
                if math.isnan(value):
                    if len(episode.nan_steps) < 20:
                        episode.nan_steps.append(episode.length + offset)
                    episode.nan_count += 1
                else:
                    episode.total += value
        steps = columns[layout.step][lo:hi] if layout.step is not None else None
        if steps is not None:
            self._check_steps(episode, steps, base + lo)
        for name in layout.terminal_fields:
            fired = np.flatnonzero(_flags(columns[name][lo:hi]))
            if len(fired):
                if name == layout.truncated:
                    episode.truncated = True
                else:
                    episode.terminated = True
                first = episode.length + int(fired[0])
                if episode.terminal_step is None or first < episode.terminal_step:
                    episode.terminal_step = first
                    episode.terminal_at_step = steps[int(fired[0])] if steps is not None else None
                episode.terminal_count += len(fired)
        episode.length += count
        episode.last_position = base + hi - 1

    @staticmethod
    def _check_steps(episode: _Episode, steps: Sequence[Any], position: int) -> None:
        for offset, step in enumerate(steps):
            if step is None:
                continue
            if episode.last_step is not None:
                if step < episode.last_step and len(episode.out_of_order) < 5:
                    episode.out_of_order.append(
                        f"step {step} after step {episode.last_step} (row {position + offset:,})"
                    )
                elif step == episode.last_step:
                    episode.repeated += 1
                elif (
                    isinstance(step, int)
                    and isinstance(episode.last_step, int)
                    and step > episode.last_step + 1
                ):
                    episode.skipped += step - episode.last_step - 1
            episode.last_step = step
            if episode.max_step is None or step > episode.max_step:
                episode.max_step = step

    def _add_lists(self, columns: Mapping[str, list[Any]], base: int, rows: int) -> None:
        layout = self.layout
        for row in range(rows):
            position = base + row
            if self._wanted is not None and position not in self._wanted:
                continue
            ident = columns[layout.episode][row] if layout.episode is not None else position
            lists = {name: columns[name][row] or [] for name in layout.columns if name != layout.episode}
            length = max((len(v) for v in lists.values() if isinstance(v, list)), default=0)
            episode = _Episode(episode=ident, first_position=position)
            self._steps(
                episode,
                {k: v if isinstance(v, list) else [v] * length for k, v in lists.items()},
                0,
                length,
                0,
            )
            episode.last_position = position
            self._done.append(episode)

    def _add_rows(self, columns: Mapping[str, list[Any]], base: int, rows: int) -> None:
        ids = columns[self.layout.episode or ""]
        start = 0
        while start < rows:
            ident = ids[start]
            end = start + 1
            while end < rows and ids[end] == ident:
                end += 1
            if self._wanted is None or ident in self._wanted:
                key = _hashable(ident)
                episode = self._open.get(key)
                if episode is None:
                    episode = self._open[key] = _Episode(episode=ident, first_position=base + start)
                self._steps(episode, columns, start, end, base)
            start = end

    def _add_stream(self, columns: Mapping[str, list[Any]], base: int, rows: int) -> None:
        terminal = np.zeros(rows, dtype=bool)
        for name in self.layout.terminal_fields:
            terminal |= _flags(columns[name])
        ends = [int(i) + 1 for i in np.flatnonzero(terminal)]
        start = 0
        for end in [*ends, rows]:
            if end <= start:
                continue
            episode = self._open.get("current")
            if episode is None:
                episode = self._open["current"] = _Episode(
                    episode=self._next_index, first_position=base + start
                )
                self._next_index += 1
            self._steps(episode, columns, start, end, base)
            if end in ends:
                self._close(self._open.pop("current"))
            start = end

    def _close(self, episode: _Episode) -> None:
        if self._wanted is None or any(
            episode.first_position <= p <= episode.last_position for p in self._wanted
        ):
            self._done.append(episode)

    # ----------------------------------------------------------------------------------------- finishing

    def finish(self) -> list[EpisodeSummary]:
        """Every episode seen (those still open never ended), in the order they began."""
        pending = list(self._open.values())
        self._open = {}
        for episode in pending:
            if self.layout.layout == "stream":
                self._close(episode)
            else:
                self._done.append(episode)
        return [e.summary() for e in sorted(self._done, key=lambda e: e.first_position)]


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
