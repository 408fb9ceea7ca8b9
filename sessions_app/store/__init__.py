"""The session's storage: the row lock and KV (`state`), the cold archive (`cold_store`), the
one message-record codec (`codec`) and the hook slots lower layers call upward through
(`hooks`). Nothing here imports a read, a service or a task.
"""
