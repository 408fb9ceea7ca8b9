"""`manage.py archive_messages`: move old messages to cold chunks, or restore a session."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from contextproto.errors import ApplicationError
from sessions_app.services import archive


class Command(BaseCommand):
    help = (
        "Archive old messages into compressed chunks (one session, or every session with "
        "enough old messages), or restore one session's chunks with --restore."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--session", help="Session id; without it, sweep all sessions.")
        parser.add_argument("--keep-last", type=int, default=2000, help="Messages kept hot.")
        parser.add_argument("--chunk-size", type=int, default=500, help="Messages per chunk.")
        parser.add_argument(
            "--older-than",
            type=int,
            default=0,
            metavar="SECONDS",
            help="Archive only messages older than this (default 0: any age).",
        )
        parser.add_argument(
            "--limit-sessions", type=int, default=1000, help="Sessions per sweep (no --session)."
        )
        parser.add_argument(
            "--restore", action="store_true", help="Move the session's chunks back to hot rows."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        session_id = options["session"]
        keep_last, chunk_size = options["keep_last"], options["chunk_size"]
        if keep_last < 0 or chunk_size < 1:
            raise CommandError("--keep-last must be >= 0 and --chunk-size >= 1.")
        try:
            if options["restore"]:
                if not session_id:
                    raise CommandError("--restore needs --session ID.")
                restored = archive.restore_session(session_id=session_id)
                self.stdout.write(f"restored {restored} messages of session {session_id}")
                return
            if session_id:
                older_than = None
                if options["older_than"]:
                    older_than = timezone.now() - timedelta(seconds=options["older_than"])
                chunks = archive.archive_session(
                    session_id=session_id,
                    keep_last=keep_last,
                    chunk_size=chunk_size,
                    older_than=older_than,
                )
                moved = sum(c.message_count for c in chunks)
                self.stdout.write(
                    f"archived {moved} messages in {len(chunks)} chunks of session {session_id}"
                )
                return
            sweep = archive.archive_old_messages(
                older_than_seconds=options["older_than"],
                keep_last=keep_last,
                chunk_size=chunk_size,
                limit_sessions=options["limit_sessions"],
            )
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        self.stdout.write(
            f"archived {sweep.messages} messages in {sweep.chunks} chunks "
            f"of {sweep.sessions} sessions"
        )
        if sweep.failed:
            raise CommandError(f"archive failed for sessions: {', '.join(sweep.failed)}")
