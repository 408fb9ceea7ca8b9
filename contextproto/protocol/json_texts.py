"""The engine's JSON spellings, each made by one encoder built once.

`json.dumps` with any keyword argument builds a new `JSONEncoder` on every call, and a view
spells arguments, contents and token estimates per message; so each spelling here is one
encoder's `encode`, which gives exactly what the `json.dumps` call it names gives
(tests/protocol/test_json_texts.py).
"""

from __future__ import annotations

import json

# json.dumps(value, ensure_ascii=False)
plain = json.JSONEncoder(ensure_ascii=False).encode
# json.dumps(value, ensure_ascii=False, separators=(",", ":"))
compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# json.dumps(value, sort_keys=True, ensure_ascii=False)
canonical = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode
# json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
canonical_compact = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":")
).encode
# json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
canonical_any = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode
