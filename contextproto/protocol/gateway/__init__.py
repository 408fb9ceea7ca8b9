"""The gateway's pure parts (contract §14): transcripts, reconciliation and the two wire formats.

The gateway lets a client of the OpenAI Chat Completions or Anthropic Messages API drive a
session by changing its base URL. What does not need the database lives here: the
transcript a client holds and how it is read off the log (`transcript`), how a request's
messages are matched against it (`reconcile`), and each API's requests, replies, stream
events and errors (`wire`, `openai_wire`, `anthropic_wire`). The Django side
(sessions_app/services/gateway.py) loads rows, calls these and stores what they return.
"""
