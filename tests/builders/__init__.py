"""Builders of test data on the Django side, in one place.

* `sessions`: sessions built turn by turn the way a host builds them, through the services
  the API uses or through the API itself (an `api_session` handle): the admin pages' sessions,
  `HostTurns`, the archive's rich session, the replay tests' recorded flavours.
* `bulk`: big data inserted directly (bulk_create or one SQL statement) for query-count tests
  and benchmarks: finished messages, and the console's sessions, runs, jobs and receipts.
* `dumps`: what every reader and view returns for a session, to compare before and after.

The engine's own tests build logs without a database: tests/protocol/logbuilder.py, which
imports no Django and stays beside them.
"""
