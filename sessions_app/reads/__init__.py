"""Every read of the sessions' rows; nothing here writes.

`raw_log` (the log, hot and cold merged by MessageIndex, and the state beside it), `hot_sql`
(the turn's reads in plain SQL), `reader` (the engine's SessionReader port over both),
`lists` (the API's list and lookup selectors), `usage` (usage and cost totals) and `history`
(the state at a revision). The admin pages' own reads stay in `admin_views/reads.py`.
"""
