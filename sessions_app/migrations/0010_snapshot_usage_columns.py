"""Snapshot usage by kind in columns, so totals are one SUM (contract §8, issue 24).

The backfill reads what the `usage` JSON already holds, under every spelling it was stored
with: `cachedInputTokens` (OpenAI, external hosts) and `cacheCreationInputTokens` (Anthropic)
besides today's names. Its rules are frozen here rather than imported, so a later change of
contextproto.usage cannot change what this migration did.
"""

import math
from decimal import Decimal, localcontext

from django.db import migrations, models

BATCH = 500
PRICE_KEYS = ("input", "cacheRead", "cacheWrite", "output")


def _count(value):
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return max(int(value), 0)


def _first(usage, *names):
    for name in names:
        value = _count(usage.get(name))
        if value is not None:
            return value
    return 0


def _tokens(usage):
    if not isinstance(usage, dict):
        return None
    total = _count(usage.get("inputTokens"))
    if total is None:
        return None
    read = min(_first(usage, "cacheReadInputTokens", "cachedInputTokens"), total)
    write = min(_first(usage, "cacheWriteInputTokens", "cacheCreationInputTokens"), total - read)
    return total, read, write, _count(usage.get("outputTokens")) or 0


def _prices(prices):
    # Only a complete, sane price list prices a turn (the publish check of later versions).
    if not isinstance(prices, dict) or set(prices) != set(PRICE_KEYS):
        return None
    found = {}
    for key in PRICE_KEYS:
        value = prices[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not (math.isfinite(value) and 0 <= value <= 1_000_000_000):
            return None
        found[key] = Decimal(str(value))
    return found


def _cost(tokens, prices):
    if prices is None:
        return None
    total, read, write, output = tokens
    with localcontext() as context:
        context.prec = 60
        amount = (
            (total - read - write) * prices["input"]
            + read * prices["cacheRead"]
            + write * prices["cacheWrite"]
            + output * prices["output"]
        )
        return (amount / Decimal(1_000_000)).quantize(Decimal(1).scaleb(-12))


def fill_usage_columns(apps, schema_editor):
    snapshots = apps.get_model("sessions_app", "ProjectionSnapshot")
    rows = (
        snapshots.objects.filter(usage__isnull=False)
        .order_by("pk")
        .values_list("pk", "usage", "session__agent_version__prices")
    )
    fields = [
        "input_tokens",
        "cache_read_input_tokens",
        "cache_write_input_tokens",
        "output_tokens",
        "cost",
    ]
    batch = []
    for pk, usage, prices in rows.iterator(chunk_size=BATCH):
        tokens = _tokens(usage)
        if tokens is None:
            continue
        batch.append(
            snapshots(
                pk=pk,
                input_tokens=tokens[0],
                cache_read_input_tokens=tokens[1],
                cache_write_input_tokens=tokens[2],
                output_tokens=tokens[3],
                cost=_cost(tokens, _prices(prices)),
            )
        )
        if len(batch) >= BATCH:
            snapshots.objects.bulk_update(batch, fields)
            batch = []
    if batch:
        snapshots.objects.bulk_update(batch, fields)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0009_snapshot_body"),
        ("agents", "0002_model_prompt_cache_prices"),
    ]

    operations = [
        migrations.AddField(
            model_name="projectionsnapshot",
            name="input_tokens",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="projectionsnapshot",
            name="cache_read_input_tokens",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="projectionsnapshot",
            name="cache_write_input_tokens",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="projectionsnapshot",
            name="output_tokens",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="projectionsnapshot",
            name="cost",
            field=models.DecimalField(blank=True, decimal_places=12, max_digits=32, null=True),
        ),
        migrations.RunPython(fill_usage_columns, migrations.RunPython.noop),
    ]
