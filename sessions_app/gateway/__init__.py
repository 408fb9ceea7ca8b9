"""The gateway (contract §14, §19.1, §21): OpenAI- and Anthropic-compatible endpoints that drive
a session, so an agent that exists today gets the protocol by its base URL.

One request is a pipeline of stages, each returning a frozen value the next one takes:
`incoming.read_incoming` (the key, the body, the client's wire) → `open.open_request` (the
session, the reconciliation, the request's input, its run and the first view, in ONE commit)
→ `drive.drive` (the runtime's turns with the model called from here: awaited or streamed,
so a client that goes away closes the upstream call) → `views` (the reply or the stream in
the client's wire). Every client API is one `ClientWire` (contextproto/protocol/gateway/);
nothing here branches on the format. `record.ExchangeRecord` is the request's record: its
row, its counters, its log line.
"""
