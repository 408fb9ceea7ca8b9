"""Fast, seeded construction of big sessions for query-count tests and benchmarks."""

from __future__ import annotations

import random
import uuid

from django.db import transaction
from django.utils import timezone

from sessions_app.models import Message, Session


@transaction.atomic
def bulk_history(session: Session, *, total: int, windows: int = 50, seed: int = 7) -> None:
    """Append `total` finished messages spread over `windows` windows (plus `main`).

    Writes host tool call/result pairs and assistant texts directly with bulk_create (raw
    inserts are allowed; only updates and deletes of messages are refused).
    """
    rng = random.Random(seed)
    session = Session.objects.select_for_update(no_key=True).get(pk=session.pk)
    start = session.next_message_index
    now = timezone.now()
    rows: list[Message] = []
    index = start
    window_names = ["main"] + [f"w{n:02d}" for n in range(windows - 1)]
    while index < start + total:
        window = rng.choice(window_names)
        if rng.random() < 0.5 and index + 1 < start + total:
            call_id = f"bulk_{index}"
            rows.append(
                Message(
                    id=uuid.uuid4(),
                    session=session,
                    index=index,
                    window_id=window,
                    role="assistant",
                    kind="tool_call",
                    content="",
                    tool_call_id=call_id,
                    tool_name="lookup",
                    arguments={"q": index},
                    created_at=now,
                )
            )
            rows.append(
                Message(
                    id=uuid.uuid4(),
                    session=session,
                    index=index + 1,
                    window_id=window,
                    role="tool",
                    kind="tool_result",
                    content=f"result {index}",
                    tool_call_id=call_id,
                    is_error=False,
                    created_at=now,
                )
            )
            index += 2
        else:
            rows.append(
                Message(
                    id=uuid.uuid4(),
                    session=session,
                    index=index,
                    window_id=window,
                    role="assistant",
                    kind="text",
                    content=f"note {index}",
                    created_at=now,
                )
            )
            index += 1
    Message.objects.bulk_create(rows, batch_size=5000)
    session.next_message_index = index
    session.save(update_fields=["next_message_index"])
