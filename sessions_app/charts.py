"""Server-rendered inline SVG charts for the session browser (no JavaScript, no CDN).

Every piece of text that reaches the SVG goes through `format_html`, so labels built from
model data (window ids, fold ids) are escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

MAINTENANCE = "maintenance"
FOLD = "fold"
MARKER_COLOURS = {MAINTENANCE: "#b35c00", FOLD: "#6a3d9a"}


@dataclass(frozen=True)
class Turn:
    """One turn: its position label and the provider-reported input tokens (None: unknown).

    `input_tokens` counts every input token; the cache counts are the parts of it read from
    and written to the provider's cache (contract §8), the rest is uncached. `cost` is the
    turn's cost at the version's prices (None: no prices).
    """

    label: str
    input_tokens: int | None
    href: str = ""  # where a click on the point leads (the turn's snapshot), if anywhere
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None

    @property
    def uncached_tokens(self) -> int:
        return max((self.input_tokens or 0) - self.cache_read_tokens - self.cache_write_tokens, 0)


# The input stack, bottom up in the order a request is read: the cached prefix, the part
# written to the cache, the uncached rest. (css class, legend label, fill, count of a turn)
STACKS = (
    ("cache-read", "cache read", "#9ecae1", lambda t: t.cache_read_tokens),
    ("cache-write", "cache write", "#fdae6b", lambda t: t.cache_write_tokens),
    ("uncached", "uncached", "#c7d9e4", lambda t: t.uncached_tokens),
)
COST_COLOUR = "#2e7d32"


@dataclass(frozen=True)
class Marker:
    """An event between turns: `position` is in turn units (0 = first turn, 1.5 = between)."""

    position: float
    kind: str
    label: str


def _nice_max(value: int) -> int:
    """Round an axis maximum up to 1, 2 or 5 times a power of ten."""
    if value <= 0:
        return 1
    magnitude = 1
    while magnitude * 10 <= value:
        magnitude *= 10
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _nice_cost_max(value: float) -> float:
    """`_nice_max` for costs, which are often far below 1."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * magnitude >= value * (1 - 1e-12):
            return step * magnitude
    return 10 * magnitude


def _cost_text(value: float) -> str:
    return f"{value:.6g}"


def input_tokens_chart(
    turns: Sequence[Turn],
    markers: Sequence[Marker] = (),
    *,
    threshold: int | None = None,
    width: int = 760,
    height: int = 240,
) -> SafeString:
    """Return an `<svg>` chart of input tokens per turn with markers and a threshold.

    The input tokens are stacked by kind (cache read, cache write, uncached) under the line
    of their total; a turn's point links to its view. With prices, the cost per turn is a
    second line on its own scale (right axis).
    """
    costs = [t.cost for t in turns if t.cost is not None and t.input_tokens is not None]
    left, right, top, bottom = 56, 64 if costs else 12, 12, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    known = [t.input_tokens for t in turns if t.input_tokens is not None]
    y_max = _nice_max(max([*known, threshold or 0, 1]))
    cost_max = _nice_cost_max(max(costs)) if costs else 1.0
    count = max(len(turns), 1)

    def x_of(position: float) -> float:
        if count == 1:
            return left + plot_w / 2
        return left + plot_w * position / (count - 1)

    def y_of(value: float) -> float:
        return top + plot_h * (1 - value / y_max)

    def y_of_cost(value: float) -> float:
        return top + plot_h * (1 - value / cost_max)

    parts: list[SafeString] = [
        format_html(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#ccc"/>',
            left,
            top,
            plot_w,
            plot_h,
        )
    ]
    for fraction in (0, 0.5, 1):
        value = int(y_max * fraction)
        y = round(y_of(value), 1)
        parts.append(
            format_html(
                '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#eee"/>'
                '<text x="{}" y="{}" font-size="10" text-anchor="end" fill="#666">{}</text>',
                left,
                left + plot_w,
                y,
                y,
                left - 4,
                y + 3,
                f"{value:,}",
            )
        )
        if costs:
            parts.append(
                format_html(
                    '<text class="cost-axis" x="{}" y="{}" font-size="10" fill="{}">{}</text>',
                    left + plot_w + 4,
                    y + 3,
                    COST_COLOUR,
                    _cost_text(cost_max * fraction),
                )
            )
    indexed = [(i, t) for i, t in enumerate(turns) if t.input_tokens is not None]
    parts.extend(_stacks(indexed, x_of, y_of, count))
    if threshold:
        y = round(y_of(threshold), 1)
        parts.append(
            format_html(
                '<line class="threshold" x1="{}" x2="{}" y1="{}" y2="{}" stroke="#c00" '
                'stroke-dasharray="4 3"><title>maintenance trigger: {} tokens</title></line>',
                left,
                left + plot_w,
                y,
                y,
                threshold,
            )
        )
    for marker in markers:
        x = round(x_of(marker.position), 1)
        parts.append(
            format_html(
                '<line class="marker marker-{}" x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" '
                'stroke-width="2" stroke-dasharray="{}"><title>{}</title></line>',
                marker.kind,
                x,
                x,
                top,
                top + plot_h,
                MARKER_COLOURS.get(marker.kind, "#333"),
                "2 2" if marker.kind == FOLD else "6 2",
                marker.label,
            )
        )
    points = [(round(x_of(i), 1), round(y_of(t.input_tokens or 0), 1), t) for i, t in indexed]
    if len(points) > 1:
        parts.append(
            format_html(
                '<polyline class="input-line" fill="none" stroke="#417690" stroke-width="2" '
                'points="{}"/>',
                " ".join(f"{x},{y}" for x, y, _ in points),
            )
        )
    cost_points = [
        (round(x_of(i), 1), round(y_of_cost(t.cost), 1), t)
        for i, t in indexed
        if t.cost is not None
    ]
    if len(cost_points) > 1:
        parts.append(
            format_html(
                '<polyline class="cost-line" fill="none" stroke="{}" stroke-width="2" '
                'stroke-dasharray="5 2" points="{}"/>',
                COST_COLOUR,
                " ".join(f"{x},{y}" for x, y, _ in cost_points),
            )
        )
    for x, y, turn in cost_points:
        parts.append(
            format_html(
                '<rect class="cost-point" x="{}" y="{}" width="5" height="5" fill="{}">'
                "<title>turn {}: cost {}</title></rect>",
                round(x - 2.5, 1),
                round(y - 2.5, 1),
                COST_COLOUR,
                turn.label,
                _cost_text(turn.cost or 0.0),
            )
        )
    for x, y, turn in points:
        circle = format_html(
            '<circle class="turn" cx="{}" cy="{}" r="3" fill="#417690">'
            "<title>turn {}: {} input tokens ({} cache read, {} cache write, {} uncached){}"
            "</title></circle>",
            x,
            y,
            turn.label,
            turn.input_tokens,
            turn.cache_read_tokens,
            turn.cache_write_tokens,
            turn.uncached_tokens,
            f"; cost {_cost_text(turn.cost)}" if turn.cost is not None else "",
        )
        parts.append(format_html('<a href="{}">{}</a>', turn.href, circle) if turn.href else circle)
    parts.append(
        format_html(
            '<text x="{}" y="{}" font-size="10" fill="#666">turn 1</text>'
            '<text x="{}" y="{}" font-size="10" text-anchor="end" fill="#666">turn {}</text>',
            left,
            height - 8,
            left + plot_w,
            height - 8,
            len(turns),
        )
    )
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" class="tokens-chart" width="{}" height="{}" '
        'viewBox="0 0 {} {}" role="img" aria-label="Input tokens per turn">{}</svg>',
        width,
        height,
        width,
        height,
        format_html_join("", "{}", ((p,) for p in parts)),
    )


def _stacks(
    indexed: Sequence[tuple[int, Turn]],
    x_of: Callable[[float], float],
    y_of: Callable[[float], float],
    count: int,
) -> list[SafeString]:
    """One filled band per input kind, stacked bottom up; kinds no turn has are left out.

    A single turn gets a narrow band around its point, so it still shows.
    """
    if not indexed:
        return []
    half_band = 6 if count == 1 else 0
    bands: list[SafeString] = []
    below = [0] * len(indexed)
    for css, label, fill, part in STACKS:
        values = [part(turn) for _, turn in indexed]
        above = [b + v for b, v in zip(below, values, strict=True)]
        if any(values):
            xs = [x_of(i) for i, _ in indexed]
            if half_band:
                xs = [xs[0] - half_band, xs[0] + half_band]
                top_line = [above[0], above[0]]
                bottom_line = [below[0], below[0]]
            else:
                top_line, bottom_line = above, below
            outline = [(x, y_of(v)) for x, v in zip(xs, top_line, strict=True)] + [
                (x, y_of(v)) for x, v in reversed(list(zip(xs, bottom_line, strict=True)))
            ]
            bands.append(
                format_html(
                    '<polygon class="stack stack-{}" fill="{}" fill-opacity="0.85" stroke="none" '
                    'points="{}"><title>{}: {} tokens over these turns</title></polygon>',
                    css,
                    fill,
                    " ".join(f"{round(x, 1)},{round(y, 1)}" for x, y in outline),
                    label,
                    f"{sum(values):,}",
                )
            )
        below = above
    return bands
