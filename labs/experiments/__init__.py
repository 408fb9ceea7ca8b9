"""The experiment harness (SPEC §13): run a pre-registered plan of protocol groups.

`plan` loads and validates a plan (experiments/experiment-plan.schema.json plus the
cross-references a schema cannot express), `runner` drives the groups through the stages
with the built-in runtime, `checks` computes what every run is judged on, `report` writes
report.json / report.md, and `admin_pages` lists the reports for operators.
"""
