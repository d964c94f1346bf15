// svg.ts - a small SVG chart writer for the benchmarks' figures, with no dependencies: one or
// more panels stacked vertically, each a horizontal chart of categories (one row each) with
// a value axis, where a series draws bars from zero or dots, and an optional shaded band
// (a tolerance, say). The output is a plain string, the same bytes for the same input, so
// a chart committed under docs/images/ can be checked against its figures. It does not
// read or write files, and it does not choose what to plot (scripts/bench/lib/charts.ts).

export interface Series {
  name: string;
  /** Any SVG colour. */
  color: string;
  mark: 'bar' | 'dot';
  /** One value per category; null leaves the category without a mark of this series. */
  values: (number | null)[];
  /** Write each value beside its mark (bars only). */
  labels?: boolean;
}

export interface Panel {
  title: string;
  /** The value axis's unit, written under it. */
  unit: string;
  categories: string[];
  series: Series[];
  /** A shaded stretch of the value axis, [from, to], with its name in the legend. */
  band?: { from: number; to: number; name: string };
  /** How a value is written on the axis and beside a bar. */
  format?: (value: number) => string;
}

const FONT = 12;
const CHAR = 6.6; // a character's width at FONT px in a sans-serif face, roughly
const ROW_GAP = 8;
const BAR = 12;
const DOT_ROW = 14;
const DOT_STEP = 5; // each dot series a little lower than the last, so equal values stay apart

/** Escapes text for SVG character data and attribute values. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

/** A coordinate with one decimal, so that equal inputs give equal bytes. */
const n = (x: number) => String(Math.round(x * 10) / 10);

/** Three significant digits, without a trailing ".0". */
export function shortNumber(value: number): string {
  if (value === 0) return '0';
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(value))));
  return String(Number(value.toFixed(Math.min(digits, 6))));
}

/** Axis ticks at 1, 2 or 5 times a power of ten, covering [lo, hi] with about five steps. */
export function niceTicks(lo: number, hi: number): number[] {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / 5;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) as number;
  const ticks: number[] = [];
  for (let t = Math.floor(lo / step) * step; t < hi + step * 0.999; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

function rowHeight(panel: Panel): number {
  const bars = panel.series.filter((s) => s.mark === 'bar').length;
  const dots = panel.series.filter((s) => s.mark === 'dot').length;
  return Math.max(bars * BAR, DOT_ROW + (dots - 1) * DOT_STEP) + ROW_GAP;
}

/** The SVG document of the panels, `width` pixels wide. */
export function chart(panels: Panel[], width = 720): string {
  const labelWidth = Math.ceil(Math.max(...panels.flatMap((p) => p.categories.map((c) => c.length))) * CHAR) + 12;
  const left = labelWidth + 8;
  const right = width - 56;
  const parts: string[] = [];
  let y = 0;
  for (const panel of panels) {
    const values = panel.series.flatMap((s) => s.values.filter((v): v is number => v !== null && Number.isFinite(v)));
    if (panel.band) values.push(panel.band.from, panel.band.to);
    const ticks = niceTicks(Math.min(0, ...values), Math.max(0, ...values));
    const [lo, hi] = [ticks[0], ticks[ticks.length - 1]];
    const x = (v: number) => left + ((v - lo) / (hi - lo)) * (right - left);
    const fmt = panel.format ?? shortNumber;
    const row = rowHeight(panel);

    y += 22;
    parts.push(`<text x="${n(left)}" y="${n(y)}" font-weight="bold">${escapeXml(panel.title)}</text>`);
    // The legend: one swatch per series (and the band), in order.
    y += 18;
    let lx = left;
    const legend = [...(panel.band ? [{ name: panel.band.name, color: '#000', mark: 'band' as const }] : []), ...panel.series];
    for (const item of legend) {
      if (item.mark === 'dot') parts.push(`<circle cx="${n(lx + 5)}" cy="${n(y - 4)}" r="4" fill="${item.color}"/>`);
      else if (item.mark === 'band') parts.push(`<rect x="${n(lx)}" y="${n(y - 9)}" width="10" height="10" fill="#2a7" fill-opacity="0.15"/>`);
      else parts.push(`<rect x="${n(lx)}" y="${n(y - 9)}" width="10" height="10" fill="${item.color}"/>`);
      parts.push(`<text x="${n(lx + 14)}" y="${n(y)}">${escapeXml(item.name)}</text>`);
      lx += 14 + item.name.length * CHAR + 18;
    }
    y += 10;
    const top = y;
    const bottom = top + panel.categories.length * row;
    if (panel.band) {
      const [a, b] = [x(panel.band.from), x(panel.band.to)];
      parts.push(`<rect x="${n(a)}" y="${n(top)}" width="${n(b - a)}" height="${n(bottom - top)}" fill="#2a7" fill-opacity="0.15"/>`);
    }
    for (const t of ticks) {
      parts.push(`<line x1="${n(x(t))}" y1="${n(top)}" x2="${n(x(t))}" y2="${n(bottom)}" stroke="${t === 0 ? '#888' : '#ddd'}"/>`);
      parts.push(`<text x="${n(x(t))}" y="${n(bottom + 14)}" text-anchor="middle" fill="#555">${escapeXml(fmt(t))}</text>`);
    }
    parts.push(`<text x="${n((left + right) / 2)}" y="${n(bottom + 30)}" text-anchor="middle" fill="#555">${escapeXml(panel.unit)}</text>`);
    panel.categories.forEach((category, i) => {
      const rowTop = top + i * row + ROW_GAP / 2;
      const middle = rowTop + (row - ROW_GAP) / 2;
      parts.push(`<text x="${n(labelWidth)}" y="${n(middle + 4)}" text-anchor="end">${escapeXml(category)}</text>`);
      let bar = 0;
      let dot = 0;
      const dots = panel.series.filter((s) => s.mark === 'dot').length;
      for (const s of panel.series) {
        const v = s.values[i];
        if (s.mark === 'bar') {
          const barTop = rowTop + bar * BAR;
          bar++;
          if (v === null || v === undefined || !Number.isFinite(v)) continue;
          const [a, b] = [x(Math.min(0, v)), x(Math.max(0, v))];
          parts.push(`<rect x="${n(a)}" y="${n(barTop + 1)}" width="${n(Math.max(b - a, 0.5))}" height="${BAR - 2}" fill="${s.color}"><title>${escapeXml(`${category}, ${s.name}: ${fmt(v)}`)}</title></rect>`);
          if (s.labels) parts.push(`<text x="${n(v < 0 ? a - 3 : b + 3)}" y="${n(barTop + BAR - 2)}" font-size="10" text-anchor="${v < 0 ? 'end' : 'start'}">${escapeXml(fmt(v))}</text>`);
        } else {
          const cy = middle + (dot - (dots - 1) / 2) * DOT_STEP;
          dot++;
          if (v === null || v === undefined || !Number.isFinite(v)) continue;
          parts.push(`<circle cx="${n(x(v))}" cy="${n(cy)}" r="4" fill="${s.color}" fill-opacity="0.85"><title>${escapeXml(`${category}, ${s.name}: ${fmt(v)}`)}</title></circle>`);
        }
      }
    });
    y = bottom + 40;
  }
  const height = Math.ceil(y);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="${FONT}">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
