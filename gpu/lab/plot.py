"""Line charts as SVG text (no plotting library): the loss curves of `flashsim demo train`."""

from html import escape

from sim.core.format import number

WIDTH, HEIGHT, MARGIN = 640, 360, 48
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def line_chart(series: dict[str, list[float]], *, title: str, x_label: str, y_label: str) -> str:
    """An SVG chart of each named series against its index (0, 1, 2, …), with a legend and min/max tick labels."""
    values = [y for ys in series.values() for y in ys]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    steps = max(len(ys) for ys in series.values()) - 1 or 1
    w, h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def point(i: int, y: float) -> str:
        return f"{MARGIN + w * i / steps:.1f},{MARGIN + h * (hi - y) / span:.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
        f'<rect x="{MARGIN}" y="{MARGIN}" width="{w}" height="{h}" fill="none" stroke="#999"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 10}" text-anchor="middle">{escape(x_label)} (0 … {steps})</text>',
        f'<text x="12" y="{HEIGHT / 2}" transform="rotate(-90 12 {HEIGHT / 2})" text-anchor="middle">{escape(y_label)}</text>',
        f'<text x="{MARGIN - 4}" y="{MARGIN + 4}" text-anchor="end">{number(hi, 2)}</text>',
        f'<text x="{MARGIN - 4}" y="{MARGIN + h}" text-anchor="end">{number(lo, 2)}</text>',
    ]
    for n, (name, ys) in enumerate(series.items()):
        color = COLORS[n % len(COLORS)]
        dash = ' stroke-dasharray="6 4"' if n % 2 else ""
        points = " ".join(point(i, y) for i, y in enumerate(ys))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{points}"/>')
        parts.append(
            f'<text x="{MARGIN + w - 8}" y="{MARGIN + 18 + 16 * n}" text-anchor="end" fill="{color}">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
