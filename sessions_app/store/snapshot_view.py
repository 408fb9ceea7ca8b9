"""What a reader gets for a snapshot's body: the view as sent, and how it was obtained."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STORED = "stored"
REBUILT = "rebuilt"


@dataclass(frozen=True)
class SnapshotView:
    """A snapshot's body (`{"messages", "sources", "request"}`) and its provenance (contract §4.6a).

    `body`: "stored" when decoded from what the turn wrote, "rebuilt" when rebuilt from the
    state at R and the log through U (the body was dropped by retention, or lost between the
    turn's commit and its write). `hash_matches`: for a rebuilt body, whether its request
    hashes to the value the turn recorded (None when the turn recorded none). `problem`: why
    a body could not be rebuilt (then `body` holds no view).
    """

    body: dict[str, Any]
    origin: str = STORED
    hash_matches: bool | None = None
    notes: tuple[str, ...] = field(default=())
    problem: str | None = None

    @property
    def rebuilt(self) -> bool:
        return self.origin == REBUILT
