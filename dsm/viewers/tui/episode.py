"""The episode view of RL data: the steps of one episode as a table, its rewards as a sparkline, playback.

The episode comes from :meth:`dsm.inspect.RowSource.episodes` (its rows, return, terminal step and
anomalies); its steps are read as a lazy table like the main one (``rows`` and ``stream`` layouts: the rows
``first_position`` to ``last_position``; ``list`` layout: the one row's list columns). The terminal step is
marked ``■``, steps with an anomaly (a NaN or missing reward, a terminal flag before the end) ``!`` and red.
``space`` plays the episode step by step, ``←``/``→`` (or ``↑``/``↓``) step, ``]``/``[`` go to the next or
previous episode, ``escape`` goes back to the rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Static

from dsm.errors import DsmError
from dsm.inspect.episodes import EpisodeSummary
from dsm.inspect.source import RowSource
from dsm.inspect.view import CellView, as_number, plain
from dsm.viewers.tui.cells import preview
from dsm.viewers.tui.detail import episode_line
from dsm.viewers.tui.prompts import HelpScreen
from dsm.viewers.tui.table import Column, LazyTable
from dsm.viewers.tui.window import RowWindow

__all__ = ["EpisodeScreen", "Step", "sparkline"]

MAX_REWARDS = 100_000
"""Steps whose rewards the sparkline reads at most (the table pages through any number)."""

_BARS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Step:
    """One step of the episode: its place, its cells drawn for the table, its reward and marks."""

    index: int
    position: int
    texts: tuple[Text, ...]
    reward: float | None
    terminal: bool
    anomalies: tuple[str, ...]


def sparkline(
    rewards: Sequence[float | None], width: int, *, cursor: int | None = None, terminal: int | None = None
) -> Text:
    """``rewards`` as one line of bars ``width`` cells wide (a cell stands for several steps when there are
    more steps than cells: their mean); a NaN or missing reward is a red ``×``, the cursor's cell is
    reversed, the terminal step's cell bold."""
    count = len(rewards)
    if count == 0 or width <= 0:
        return Text("no rewards", style="dim")
    per = max(1, math.ceil(count / width))
    cells: list[tuple[float | None, bool, int, int]] = []
    for start in range(0, count, per):
        chunk = rewards[start : start + per]
        finite = [r for r in chunk if r is not None and math.isfinite(r)]
        bad = len(finite) < len(chunk)
        cells.append((sum(finite) / len(finite) if finite else None, bad, start, start + len(chunk)))
    known = [v for v, _, _, _ in cells if v is not None]
    low, high = (min(known), max(known)) if known else (0.0, 0.0)
    line = Text()
    for value, bad, start, stop in cells:
        if bad:
            char, style = "×", "bold red"
        else:
            level = 0 if high == low or value is None else round((value - low) / (high - low) * 7)
            char, style = _BARS[level], "green"
        if terminal is not None and start <= terminal < stop:
            style += " bold underline"
        if cursor is not None and start <= cursor < stop:
            style += " reverse"
        line.append(char, style=style)
    line.append(f"  min {plain(low)} max {plain(high)}", style="dim")
    if per > 1:
        line.append(f" · {per} steps a cell", style="dim")
    return line


class EpisodeScreen(Screen[None]):
    """One episode of ``source`` (``summary`` from :meth:`RowSource.episodes`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("space", "play", "Play/pause"),
        Binding("left", "step(-1)", "Step back", priority=True),
        Binding("right", "step(1)", "Step", priority=True),
        Binding("right_square_bracket", "episode(1)", "Next episode"),
        Binding("left_square_bracket", "episode(-1)", "Previous episode"),
        Binding("question_mark", "help", "Help"),
    ]
    DEFAULT_CSS = """
    EpisodeScreen { layout: vertical; }
    EpisodeScreen > #episode-head { height: auto; max-height: 8; padding: 0 1; background: $panel; }
    EpisodeScreen > #episode-rewards { height: 1; padding: 0 1; }
    EpisodeScreen > #steps { height: 1fr; }
    EpisodeScreen > #episode-status { height: 1; padding: 0 1; background: $panel; }
    """

    PLAY_SECONDS = 0.25

    def __init__(self, source: RowSource, summary: EpisodeSummary) -> None:
        super().__init__()
        self.source = source
        self.summary = summary
        layout = source.episode_layout
        if layout is None:
            raise DsmError(f"{source.ref}: no field has an RL role")
        self.rl_layout = layout
        self.names = [f.name for f in source.fields if f.name != layout.episode]
        self.rewards: list[float | None] = []
        self.playing = False
        self._timer: Timer | None = None
        self._list_steps: list[Step] | None = None
        self.window: RowWindow[Step] = RowWindow(summary.length, self._fetch)

    def compose(self) -> Any:
        yield Static(self._head(), id="episode-head")
        yield Static(Text("reading rewards…", style="dim"), id="episode-rewards")
        columns: list[Column[Step]] = []  # the gutter shows the step's place in the episode
        for number, name in enumerate(self.names):
            field = self.source.field(name)
            width = 8 if field.role in ("reward", "done", "terminated", "truncated", "action", "step") else 24
            columns.append(Column[Step](name=name, width=max(width, len(name)), render=_text_of(number)))
        yield LazyTable(self.window, columns, marker=_step_marker, id="steps")
        yield Static(id="episode-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#steps", LazyTable).focus()
        self._read_rewards()
        self._update()

    def on_unmount(self) -> None:
        self._stop()

    @property
    def table(self) -> LazyTable[Step]:
        return self.query_one("#steps", LazyTable)

    def _head(self) -> Text:
        text = Text(f"{self.source.ref} · ", style="bold")
        text.append_text(episode_line(self.summary))
        text.append(f"\nlayout {self.rl_layout.layout}", style="dim")
        text.append(" · space plays · ←/→ step · ]/[ next/previous episode · escape back", style="dim")
        return text

    # ------------------------------------------------------------------------------------ reading

    def _fetch(self, offset: int, count: int) -> Sequence[Step]:
        """Steps ``offset`` to ``offset + count`` of the episode (in the table's worker thread)."""
        if self.rl_layout.layout == "list":
            return self._steps_of_list()[offset : offset + count]
        first = self.summary.first_position
        rows = self.source.read(first + offset, count, columns=self.names, episodes=False).rows
        return [self._step(offset + i, row.position, row.cells) for i, row in enumerate(rows)]

    def _step(self, index: int, position: int, cells: Sequence[CellView]) -> Step:
        reward = None
        anomalies: list[str] = []
        for cell in cells:
            anomalies.extend(cell.anomalies)
            if cell.field == self.rl_layout.reward:
                reward = as_number(cell.value)
                if cell.value is None:
                    anomalies.append("no reward")
            if (
                cell.field in self.rl_layout.terminal_fields
                and cell.value is True
                and index < self.summary.length - 1
            ):
                anomalies.append(f"{cell.field} before the last step")
        return Step(
            index=index,
            position=position,
            texts=tuple(preview(c) for c in cells),
            reward=reward,
            terminal=index == self.summary.terminal_step,
            anomalies=tuple(anomalies),
        )

    def _steps_of_list(self) -> list[Step]:
        """The steps of a ``list`` layout episode: the i-th item of each list column is step i."""
        if self._list_steps is None:
            row = self.source.take([self.summary.first_position], columns=self.names, episodes=False).rows[0]
            steps = []
            for index in range(self.summary.length):
                cells = []
                for cell in row.cells:
                    if isinstance(cell.value, list) and not cell.masked:
                        value = cell.value[index] if index < len(cell.value) else None
                        anomalies = (
                            ("reward is NaN",)
                            if cell.field == self.rl_layout.reward and value == "NaN"
                            else ()
                        )
                        cells.append(
                            CellView(
                                field=cell.field,
                                kind="scalar",
                                value=value,
                                summary=str(value),
                                anomalies=anomalies,
                                role=cell.role,
                            )
                        )
                    else:
                        cells.append(cell)
                steps.append(self._step(index, row.position, cells))
            self._list_steps = steps
        return self._list_steps

    @work(thread=True, group="rewards", exit_on_error=False)
    def _read_rewards(self) -> None:
        rewards: list[float | None] = []
        name = self.rl_layout.reward
        try:
            if name is None:
                pass
            elif self.rl_layout.layout == "list":
                rewards = [s.reward for s in self._steps_of_list()]
            else:
                first, count = self.summary.first_position, min(self.summary.length, MAX_REWARDS)
                for offset in range(0, count, 10_000):
                    rows = self.source.read(
                        first + offset, min(10_000, count - offset), columns=[name], episodes=False
                    ).rows
                    rewards.extend(as_number(r.cells[0].value) for r in rows)
        except DsmError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
        self.app.call_from_thread(self._rewards_ready, rewards)

    def _rewards_ready(self, rewards: list[float | None]) -> None:
        self.rewards = rewards
        self._update()

    def screen_ready(self) -> bool:
        return self.table.screen_ready() and bool(self.rewards or self.rl_layout.reward is None)

    # ------------------------------------------------------------------------------------ drawing

    def on_lazy_table_cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        self._update()

    def _update(self) -> None:
        cursor = self.table.cursor
        width = max(10, self.size.width - 30)
        if self.rewards:
            self.query_one("#episode-rewards", Static).update(
                Text("reward ", style="bold")
                + sparkline(self.rewards, width, cursor=cursor, terminal=self.summary.terminal_step)
            )
        step = self.table.row_at_cursor()
        line = Text(f"episode {plain(self.summary.episode)} · step {cursor:,} of {self.summary.length:,}")
        if step is not None:
            line.append(f" · row {step.position:,}")
            if step.reward is not None:
                line.append(f" · reward {plain(step.reward)}")
            if step.terminal:
                line.append(" · terminal step", style="bold")
            for anomaly in step.anomalies:
                line.append(f" · ! {anomaly}", style="bold red")
        line.append(" · ▶ playing" if self.playing else " · paused", style="dim")
        self.query_one("#episode-status", Static).update(line)

    # ------------------------------------------------------------------------------------ actions

    def action_back(self) -> None:
        self._stop()
        self.dismiss(None)

    def action_help(self) -> None:
        self.app.push_screen(
            HelpScreen(
                extra=[
                    ("space", "play / pause the episode step by step"),
                    ("← →", "step back / forward"),
                    ("] [", "next / previous episode"),
                    ("escape", "back to the rows"),
                ]
            )
        )

    def action_step(self, step: int) -> None:
        self.table.cursor += step

    def action_play(self) -> None:
        if self.playing:
            self._stop()
        else:
            self.playing = True
            if self.table.cursor >= self.summary.length - 1:
                self.table.cursor = 0
            self._timer = self.set_interval(self.PLAY_SECONDS, self._tick)
        self._update()

    def _tick(self) -> None:
        if self.table.cursor >= self.summary.length - 1:
            self._stop()
        else:
            self.table.cursor += 1
        self._update()

    def _stop(self) -> None:
        self.playing = False
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def action_episode(self, direction: int) -> None:
        self._stop()
        self._neighbour(direction)

    @work(thread=True, group="episodes", exit_on_error=False)
    def _neighbour(self, direction: int) -> None:
        try:
            if self.rl_layout.layout == "list":
                position = self.summary.first_position + direction
                found = (
                    self.source.episodes(positions=[position]) if 0 <= position < self.source.num_rows else ()
                )
                other = found[0] if found else None
            else:
                every = self.source.episodes()
                index = next(
                    (i for i, e in enumerate(every) if e.first_position == self.summary.first_position), None
                )
                other = None
                if index is not None and 0 <= index + direction < len(every):
                    other = every[index + direction]
        except DsmError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._go_to, other, direction)

    def _go_to(self, other: EpisodeSummary | None, direction: int) -> None:
        if other is None:
            self.notify("no next episode" if direction > 0 else "no previous episode", severity="warning")
            return
        self.app.switch_screen(EpisodeScreen(self.source, other))


def _text_of(number: int) -> Callable[[Step], Text]:
    def render(step: Step) -> Text:
        return step.texts[number]

    return render


def _step_marker(step: Step) -> str | None:
    if step.anomalies:
        return "!"
    return "■" if step.terminal else None
