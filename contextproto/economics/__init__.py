"""Cache economics: what a session's views cost once a provider caches prompts.

Pure Python beside the engine (`contextproto.protocol`), never Django: the prompt-cache
simulator (`linearise`, `cache_sim`, `prices`), the cache economy report over a view's turns
(`inputs`, `causes`, `cache_report`), stored views read back into engine types
(`stored_views`) and the providers' own strategies as baselines (`baselines`, `strategies`).
It imports the engine (adapters, messages, projections); the engine never imports it.
"""
