"""The research harness (issue 26): the experiment runner and its admin pages, the demo
scenario and the `demo` / `run_experiment` commands.

A Django app of its own so it can carry its commands and admin registration; the product
(contextproto, agents, sessions_app) never imports it (tests/test_service_layers.py).
"""
