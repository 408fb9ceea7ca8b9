"""The experiment harness (docs/architecture.md: Labs): run a pre-registered plan of protocol
groups.

`plan` loads and validates a plan (experiments/experiment-plan.schema.json plus the
cross-references a schema cannot express) and `spec` reads it into typed values; `runner`
drives the groups through the stages with the built-in runtime: `setup` creates the
Application and agents, `host` plays the host for each run, `ledger` keeps the tokens and
the budget, `records` types what is recorded; `checks` computes what every run is judged on,
`results` builds the report, `report` writes report.json / report.md, and `admin_pages` lists
the reports for operators.
"""
