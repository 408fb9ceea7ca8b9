"""A view's plan (contract §4): which window it shows, which KV keys and rows it reads.

The one place that asks the catalog entry what a view is made of: `view_plan` derives the
window (a windowed version shows the state's active window, any other `main`) and the KV keys
from the entry, once; `ViewPlan.reads` adds the window's covered bound C, read with those
keys, and names the rows. Everything after it (`view.freeze`, `view.assemble`, `project`)
reads the plan, never the entry's flags or the state's `activeWindow` again.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextproto.protocol import client_state
from contextproto.protocol.catalog import ProtocolVersion
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    MAIN_WINDOW,
    checkpoint_key,
    covered_key,
    window_key,
)


@dataclass(frozen=True)
class ReadPlan:
    """The rows a source must fetch for one view, and nothing else; `project` ignores any
    other row it is given."""

    window_id: str
    after_index: int  # C: fetch W's messages with index > C ...
    through_index: int  # U: ... and index <= U
    run_id: str | None  # fetch input messages with input_run == run_id, index <= U, any window
    folds_window: str | None  # fetch this window's folds with first_index > folds_after_index
    folds_after_index: int


@dataclass(frozen=True)
class ViewPlan:
    """Which window a view of `protocol` shows and which state it reads, before anything is
    read; `reads` names its rows once the window's covered bound is known."""

    protocol: ProtocolVersion
    window_id: str
    kv_keys: tuple[str, ...]
    folds_window: str | None  # W for a windowed version (its folds are shown), else None
    run_id: str | None
    upper_bound: int
    revision: int

    def reads(self, covered_through: int) -> ReadPlan:
        """The rows of this view, given `coveredThrough/W` (C): W's messages in (C, U], the
        run's inputs through U, and the folds of `folds_window` above C."""
        return ReadPlan(
            window_id=self.window_id,
            after_index=covered_through,
            through_index=self.upper_bound,
            run_id=self.run_id,
            folds_window=self.folds_window,
            folds_after_index=covered_through,
        )


def view_plan(
    protocol: ProtocolVersion,
    *,
    active_window: str | None,
    run_id: str | None,
    upper_bound: int,
    revision: int,
) -> ViewPlan:
    """The plan of a view of `protocol` at `revision` and `upper_bound`: a windowed version
    shows the state's active window, any other `main`."""
    windowed = protocol.windowed  # asked once: the window, its keys and its folds follow
    window_id = (active_window or MAIN_WINDOW) if windowed else MAIN_WINDOW
    return ViewPlan(
        protocol=protocol,
        window_id=window_id,
        kv_keys=_kv_keys(window_id, windowed=windowed),
        folds_window=window_id if windowed else None,
        run_id=run_id,
        upper_bound=upper_bound,
        revision=revision,
    )


def _kv_keys(window_id: str, *, windowed: bool) -> tuple[str, ...]:
    """The KV keys `project` reads for window `window_id` (and the names of a gateway client's
    tools, whose definitions `view.freeze` reads next)."""
    if not windowed:
        return (covered_key(MAIN_WINDOW), checkpoint_key(MAIN_WINDOW), *client_state.VIEW_KEYS)
    return (
        KEY_ACTIVE_WINDOW,
        KEY_TASK_MEMORY,
        window_key(window_id),
        checkpoint_key(window_id),
        covered_key(window_id),
        KEY_CURRENT_WINDOW_ENTRY,
        *client_state.VIEW_KEYS,
    )
