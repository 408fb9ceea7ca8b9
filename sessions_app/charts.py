"""Server-rendered inline SVG charts for the session browser (no JavaScript, no CDN).

Every piece of text that reaches the SVG goes through `format_html`, so labels built from
model data (window ids, fold ids) are escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

MAINTENANCE = "maintenance"
FOLD = "fold"
MARKER_COLOURS = {MAINTENANCE: "#b35c00", FOLD: "#6a3d9a"}


@dataclass(frozen=True)
class Turn:
    """One turn: its position label and the provider-reported input tokens (None: unknown)."""

    label: str
    input_tokens: int | None
    href: str = ""  # where a click on the point leads (the turn's snapshot), if anywhere


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


def input_tokens_chart(
    turns: Sequence[Turn],
    markers: Sequence[Marker] = (),
    *,
    threshold: int | None = None,
    width: int = 760,
    height: int = 240,
) -> SafeString:
    """Return an `<svg>` line chart of input tokens per turn with markers and a threshold."""
    left, right, top, bottom = 56, 12, 12, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    known = [t.input_tokens for t in turns if t.input_tokens is not None]
    y_max = _nice_max(max([*known, threshold or 0, 1]))
    count = max(len(turns), 1)

    def x_of(position: float) -> float:
        if count == 1:
            return left + plot_w / 2
        return left + plot_w * position / (count - 1)

    def y_of(value: float) -> float:
        return top + plot_h * (1 - value / y_max)

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
    points = [
        (round(x_of(i), 1), round(y_of(t.input_tokens), 1), t)
        for i, t in enumerate(turns)
        if t.input_tokens is not None
    ]
    if len(points) > 1:
        parts.append(
            format_html(
                '<polyline fill="none" stroke="#417690" stroke-width="2" points="{}"/>',
                " ".join(f"{x},{y}" for x, y, _ in points),
            )
        )
    for x, y, turn in points:
        circle = format_html(
            '<circle class="turn" cx="{}" cy="{}" r="3" fill="#417690">'
            "<title>turn {}: {} input tokens</title></circle>",
            x,
            y,
            turn.label,
            turn.input_tokens,
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
