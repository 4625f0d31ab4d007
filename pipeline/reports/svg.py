"""Small inline SVG charts for the HTML run report: no plotting library, no network, crisp at any zoom.

Each function returns one `<svg>` element as a string; text is escaped here.
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

PALETTE = ("#2f6db5", "#d9534f", "#5cb85c", "#f0ad4e", "#8e6bb8", "#5bc0de", "#999999")
FONT = 'font-family="system-ui,sans-serif" font-size="12"'


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def number(x: float) -> str:
    """A short label: 1234 -> 1,234; 0.01234 -> 0.0123; 1.5e6 -> 1.5M."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.3g}M"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:.3g}"


LABEL_CHARS, CHAR_W = 24, 7  # longer row labels are cut (the whole label is the tooltip); ~7 px a character


def bars(rows: Sequence[tuple[str, Sequence[float]]], series: Sequence[str], title: str, unit: str = "",
         width: int = 560, colors: Sequence[str] = PALETTE) -> str:
    """Horizontal stacked bars: rows of (label, one value per series), in `colors` (e.g. the dropped colour
    alone for drops). The label column is as wide as the longest label shown, so none is clipped."""
    bar_h, gap, top = 16, 5, 40
    label_w = 12 + CHAR_W * max((min(len(label), LABEL_CHARS) for label, _ in rows), default=4)
    height = top + len(rows) * (bar_h + gap) + 8
    most = max((sum(v) for _, v in rows), default=0) or 1
    ends = [f'{" / ".join(number(v) for v in values)} {_unit(unit, values)}' for _, values in rows]
    scale = (width - label_w - 8 - 7 * max((len(e) for e in ends), default=0)) / most  # the value text fits too
    scale = max(scale, (width - label_w) / (4 * most))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {FONT}>',
           f'<title>{_e(title)}</title><text x="4" y="16" font-weight="bold">{_e(title)}</text>']
    x = label_w
    for i, name in enumerate(series if len(series) > 1 else ()):
        out.append(f'<rect x="{x}" y="24" width="10" height="10" fill="{colors[i % len(colors)]}"/>'
                   f'<text x="{x + 14}" y="33">{_e(name)}</text>')
        x += 20 + 7 * len(name)
    for r, (label, values) in enumerate(rows):
        y = top + r * (bar_h + gap)
        shown = label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"
        out.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end"><title>{_e(label)}</title>{_e(shown)}</text>')
        x = label_w
        for i, v in enumerate(values):
            w = max(v * scale, 0)
            if w:
                out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                           f'fill="{colors[i % len(colors)]}"><title>{_e(label)}: {_e(series[i])} '
                           f'{number(v)} {_e(unit)}</title></rect>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 13}">{_e(ends[r])}</text>')
    out.append("</svg>")
    return "".join(out)


def _unit(unit: str, values: Sequence[float]) -> str:
    """"docs" after counts, "doc" after a lone 1."""
    return unit[:-1] if unit.endswith("s") and len(values) == 1 and values[0] == 1 else unit


def _quantile(ordered: Sequence[float], q: float) -> float:
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def histogram(series: Mapping[str, Sequence[float]], title: str, xlabel: str,
              threshold: float | None = None, bins: int = 30, width: int = 560, height: int = 220,
              colors: Sequence[str] = PALETTE) -> str:
    """Stacked histogram of one or more samples on shared bins (1st to 99th percentile; values beyond
    fall in the edge bins); a dashed line at `threshold`."""
    values = sorted(v for vs in series.values() for v in vs if v is not None and math.isfinite(v))
    lo, hi = (_quantile(values, 0.01), _quantile(values, 0.99)) if values else (0.0, 1.0)
    if threshold is not None:
        lo, hi = min(lo, threshold), max(hi, threshold)
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    step = (hi - lo) / bins
    counts = []
    for vs in series.values():
        c = [0] * bins
        for v in vs:
            if v is not None and math.isfinite(v):
                c[min(max(int((v - lo) / step), 0), bins - 1)] += 1
        counts.append(c)
    most = max((sum(c[b] for c in counts) for b in range(bins)), default=0) or 1
    left, right, top, bottom = 44, 12, 36, 36
    pw, ph = width - left - right, height - top - bottom
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {FONT}>',
           f'<title>{_e(title)}</title><text x="4" y="16" font-weight="bold">{_e(title)}</text>']
    x = left
    for i, name in enumerate(series):
        out.append(f'<rect x="{x}" y="22" width="10" height="10" fill="{colors[i % len(colors)]}"/>'
                   f'<text x="{x + 14}" y="31">{_e(name)} ({len(series[name])})</text>')
        x += 50 + 7 * len(name)
    for b in range(bins):
        base = 0
        for i, c in enumerate(counts):
            if c[b]:
                h = c[b] / most * ph
                y = top + ph - (base + c[b]) / most * ph
                out.append(f'<rect x="{left + b * pw / bins:.1f}" y="{y:.1f}" width="{pw / bins - 1:.1f}" '
                           f'height="{h:.1f}" fill="{colors[i % len(colors)]}"><title>{number(lo + b * step)}'
                           f'–{number(lo + (b + 1) * step)}: {c[b]}</title></rect>')
            base += c[b]
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>')
    for frac, anchor in ((0, "start"), (0.5, "middle"), (1, "end")):  # the end labels inside the chart, not cut
        out.append(f'<text x="{left + frac * pw:.1f}" y="{top + ph + 14}" text-anchor="{anchor}">'
                   f'{number(lo + frac * (hi - lo))}</text>')
    out.append(f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{most}</text>'
               f'<text x="{left + pw / 2:.1f}" y="{height - 4}" text-anchor="middle">{_e(xlabel)}</text>')
    if threshold is not None:
        tx = left + (threshold - lo) / (hi - lo) * pw
        right_half = tx > left + pw / 2  # its label on the side with room
        out.append(f'<line x1="{tx:.1f}" y1="{top - 4}" x2="{tx:.1f}" y2="{top + ph}" stroke="#000" '
                   f'stroke-dasharray="4 3"/><text x="{tx - 3 if right_half else tx + 3:.1f}" y="{top + 14}" '
                   f'text-anchor="{"end" if right_half else "start"}">threshold {number(threshold)}</text>')
    out.append("</svg>")
    return "".join(out)


def curve(points: Sequence[tuple[float, float]], title: str, xlabel: str, ylabel: str,
          marks: Sequence[float] = (), width: int = 420, height: int = 240) -> str:
    """A line through `points` (x ascending) on [min x, max x] x [0, 1]; dashed verticals at `marks`."""
    left, right, top, bottom = 44, 12, 28, 36
    pw, ph = width - left - right, height - top - bottom
    x0, x1 = points[0][0], points[-1][0]
    sx = lambda x: left + (x - x0) / ((x1 - x0) or 1) * pw  # noqa: E731
    sy = lambda y: top + ph - y * ph  # noqa: E731
    path = " ".join(f"{'M' if i == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for i, (x, y) in enumerate(points))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {FONT}>',
           f'<title>{_e(title)}</title><text x="4" y="16" font-weight="bold">{_e(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>',
           f'<path d="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="2"/>']
    for m in marks:
        out.append(f'<line x1="{sx(m):.1f}" y1="{top}" x2="{sx(m):.1f}" y2="{top + ph}" stroke="#000" '
                   f'stroke-dasharray="4 3"/><text x="{sx(m) + 3:.1f}" y="{top + 12}">{number(m)}</text>')
    for y in (0, 0.5, 1):
        out.append(f'<text x="{left - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{y}</text>')
    out.append(f'<text x="{left}" y="{top + ph + 14}">{number(x0)}</text>'
               f'<text x="{left + pw}" y="{top + ph + 14}" text-anchor="end">{number(x1)}</text>'
               f'<text x="{left + pw / 2:.1f}" y="{height - 4}" text-anchor="middle">{_e(xlabel)}</text>'
               f'<text x="10" y="{top + ph / 2:.1f}" transform="rotate(-90 10 {top + ph / 2:.1f})" '
               f'text-anchor="middle">{_e(ylabel)}</text></svg>')
    return "".join(out)
