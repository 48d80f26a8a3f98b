// The benchmark's results as a run of record: docs/benchmarks/side-by-side.md with SVG charts
// beside it (docs/benchmarks/*.svg) of this service against the reference: the ratio per workload,
// throughput and latency per workload, and the workloads measured at several catalog sizes; and
// the figures as results.json. Written by scripts/bench.ts; docs/benchmarks.md says how to read it.

import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

export type StoreKind = 'local' | 's3';
export type Side = 'ours' | 'ref';

/** One figure of one side: a rate (higher is better) or a latency (lower is better). */
export interface Figure {
  value: number;
  unit: '/s' | 'ms';
  /** A percentile shown after the value, e.g. `{ name: 'p99', ms: 75 }`. */
  detail?: { name: string; ms: number };
}

/** A side's figures for a row (one per part, medians over the rounds), or why it has none. */
export type Outcome = Figure[] | { unavailable: string };

/** Where a row sits in a series of the same workload at several catalog sizes. */
export interface Scale {
  series: string;
  /** The catalog size (tables, versions, entries) of this row. */
  n: number;
}

export interface RowResult {
  label: string;
  parts: string[];
  outcome: Record<Side, Outcome>;
  note: string;
  scale?: Scale | undefined;
}

export interface RunInfo {
  date: string;
  machine: string;
  node: string;
  loadBefore: string;
  loadAfter: string;
  elapsed: string;
  quick: boolean;
}

const STORE_NAMES: Record<StoreKind, string> = { local: 'local disk', s3: 'radosgw' };
const COLORS = { ours: '#2563eb', ref: '#9ca3af', faster: '#16a34a', slower: '#dc2626', grid: '#e5e7eb', text: '#111827', muted: '#6b7280' };
const FONT = 'font-family="ui-sans-serif, system-ui, sans-serif" font-size="12"';

const escapeXml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const figures = (o: Outcome): Figure[] => ('unavailable' in o ? [] : o);

/** How many times faster this service is: rates divide one way, latencies the other. */
export function speedup(ours: Figure, ref: Figure): number {
  return ours.unit === '/s' ? ours.value / ref.value : ref.value / ours.value;
}

export function formatRatio(r: number): string {
  return `${r >= 10 ? r.toFixed(0) : r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}×`;
}

const formatValue = (f: Figure): string => {
  const v = f.value >= 100 ? f.value.toFixed(0) : f.value >= 10 ? f.value.toFixed(1) : f.value.toFixed(2);
  return f.unit === '/s' ? `${v}/s` : `${v} ms`;
};

/** One workload part with both sides' figures. */
interface Measured {
  label: string;
  ours: Figure;
  ref: Figure;
}

/** A row's label in a chart: without its parenthesized details (the table under the charts has them), so that it fits beside the bars. */
const chartLabel = (label: string): string => label.replace(/ \([^()]*\)/g, '');

function measured(rows: RowResult[]): Measured[] {
  const out: Measured[] = [];
  for (const r of rows) {
    const ours = figures(r.outcome.ours);
    const ref = figures(r.outcome.ref);
    const label = chartLabel(r.label);
    r.parts.forEach((part, i) => {
      const o = ours[i];
      const f = ref[i];
      if (o && f && o.value > 0 && f.value > 0) out.push({ label: r.parts.length === 1 ? label : `${label}: ${part}`, ours: o, ref: f });
    });
  }
  return out;
}

/** A log10 axis over [lo, hi] mapped onto [0, width]. */
function logAxis(values: number[], width: number): { x: (v: number) => number; ticks: number[] } {
  const lo = 10 ** Math.floor(Math.log10(Math.min(...values)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...values)));
  const span = Math.log10(hi) - Math.log10(lo) || 1;
  const ticks: number[] = [];
  for (let t = lo; t <= hi * 1.0001; t *= 10) ticks.push(t);
  return { x: (v: number) => ((Math.log10(v) - Math.log10(lo)) / span) * width, ticks };
}

const tickText = (t: number): string => (t >= 1000 ? `${t / 1000}k` : t >= 1 ? String(t) : String(Number(t.toPrecision(1))));

/** Horizontal bars, one group per workload, on a log axis. */
function barChart(
  title: string,
  axisLabel: string,
  groups: Array<{ label: string; bars: Array<{ value: number; color: string; text: string }> }>,
  reference?: number,
): string {
  // Wide enough for the longest label (about 6.6 px a character at this size), within reason.
  const longest = Math.max(...groups.map((g) => g.label.length));
  const labelWidth = Math.min(880, Math.max(200, Math.ceil(longest * 6.6) + 16));
  const plotWidth = 420;
  const barHeight = 14;
  const groupGap = 12;
  const top = 40;
  const values = groups.flatMap((g) => g.bars.map((b) => b.value)).concat(reference === undefined ? [] : [reference]);
  const axis = logAxis(values, plotWidth);
  const height = top + groups.reduce((h, g) => h + g.bars.length * barHeight + groupGap, 0) + 40;
  const width = labelWidth + plotWidth + 110;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT}>`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="14" font-weight="600" fill="${COLORS.text}">${escapeXml(title)}</text>`,
  ];
  const plotTop = top;
  const plotBottom = height - 40;
  for (const t of axis.ticks) {
    const x = labelWidth + axis.x(t);
    parts.push(`<line x1="${x}" y1="${plotTop - 4}" x2="${x}" y2="${plotBottom}" stroke="${COLORS.grid}"/>`);
    parts.push(`<text x="${x}" y="${plotBottom + 14}" text-anchor="middle" fill="${COLORS.muted}">${escapeXml(tickText(t))}</text>`);
  }
  parts.push(`<text x="${labelWidth + plotWidth / 2}" y="${plotBottom + 30}" text-anchor="middle" fill="${COLORS.muted}">${escapeXml(axisLabel)}</text>`);
  if (reference !== undefined) {
    const x = labelWidth + axis.x(reference);
    parts.push(`<line x1="${x}" y1="${plotTop - 8}" x2="${x}" y2="${plotBottom}" stroke="${COLORS.text}" stroke-dasharray="4 3"/>`);
  }
  let y = plotTop;
  for (const g of groups) {
    const groupHeight = g.bars.length * barHeight;
    parts.push(`<text x="${labelWidth - 8}" y="${y + groupHeight / 2 + 4}" text-anchor="end" fill="${COLORS.text}">${escapeXml(g.label)}</text>`);
    for (const b of g.bars) {
      const from = reference === undefined ? 0 : axis.x(reference);
      const to = axis.x(b.value);
      const x = labelWidth + Math.min(from, to);
      const w = Math.max(1, Math.abs(to - from));
      parts.push(`<rect x="${x.toFixed(1)}" y="${y + 1}" width="${w.toFixed(1)}" height="${barHeight - 2}" fill="${b.color}"/>`);
      parts.push(`<text x="${(labelWidth + Math.max(from, to) + 4).toFixed(1)}" y="${y + barHeight - 3}" fill="${COLORS.muted}">${escapeXml(b.text)}</text>`);
      y += barHeight;
    }
    y += groupGap;
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** Lines of both servers over catalog sizes, on log axes. */
function scaleChart(title: string, series: Array<{ n: number; ours: Figure; ref: Figure }>): string {
  const width = 560;
  const height = 320;
  const left = 70;
  const right = 150;
  const top = 40;
  const bottom = 50;
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  const xs = logAxis(
    series.map((p) => p.n),
    plotWidth,
  );
  const ys = logAxis(
    series.flatMap((p) => [p.ours.value, p.ref.value]),
    plotHeight,
  );
  const unit = series[0]?.ours.unit ?? 'ms';
  const px = (n: number) => left + xs.x(n);
  const py = (v: number) => top + plotHeight - ys.x(v);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT}>`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="14" font-weight="600" fill="${COLORS.text}">${escapeXml(title)}</text>`,
  ];
  for (const t of xs.ticks)
    parts.push(
      `<line x1="${px(t)}" y1="${top}" x2="${px(t)}" y2="${top + plotHeight}" stroke="${COLORS.grid}"/><text x="${px(t)}" y="${top + plotHeight + 14}" text-anchor="middle" fill="${COLORS.muted}">${escapeXml(tickText(t))}</text>`,
    );
  for (const t of ys.ticks)
    parts.push(
      `<line x1="${left}" y1="${py(t)}" x2="${left + plotWidth}" y2="${py(t)}" stroke="${COLORS.grid}"/><text x="${left - 6}" y="${py(t) + 4}" text-anchor="end" fill="${COLORS.muted}">${escapeXml(tickText(t))}</text>`,
    );
  parts.push(`<text x="${left + plotWidth / 2}" y="${height - 14}" text-anchor="middle" fill="${COLORS.muted}">catalog size (log)</text>`);
  parts.push(
    `<text x="14" y="${top + plotHeight / 2}" transform="rotate(-90 14 ${top + plotHeight / 2})" text-anchor="middle" fill="${COLORS.muted}">${unit === 'ms' ? 'ms (log; lower is better)' : 'per second (log; higher is better)'}</text>`,
  );
  for (const [side, color, name] of [
    ['ours', COLORS.ours, 'this service'],
    ['ref', COLORS.ref, 'reference'],
  ] as const) {
    const points = series.map((p) => `${px(p.n).toFixed(1)},${py(p[side].value).toFixed(1)}`);
    parts.push(`<polyline points="${points.join(' ')}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const p of series) parts.push(`<circle cx="${px(p.n).toFixed(1)}" cy="${py(p[side].value).toFixed(1)}" r="3.5" fill="${color}"/>`);
    const last = series[series.length - 1];
    if (last)
      parts.push(
        `<text x="${(px(last.n) + 8).toFixed(1)}" y="${(py(last[side].value) + 4).toFixed(1)}" fill="${color}">${escapeXml(`${name} ${formatValue(last[side])}`)}</text>`,
      );
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

const slug = (s: string): string =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');

/** The run of record's page, beside its charts and results.json. */
const BENCHMARK_PAGE = 'side-by-side.md';

/** Writes `<dir>/side-by-side.md`, its charts and results.json into `dir`; returns the page's path. */
export async function writeBenchmarkPage(dir: string, results: Array<[StoreKind, RowResult[]]>, info: RunInfo, tables: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const page: string[] = [
    '# Side by side with the reference: the latest full run',
    '',
    '<!-- Written by `npm run bench` (scripts/bench-report.ts): a full run replaces it. -->',
    '',
    "This service against the reference Lance namespace server (pylance's `lance.namespace.RestAdapter`), ",
    'both on the same store, measured by `npm run bench` in one interleaved run (this service, then the reference, each round). ',
    'Ratios above 1 mean this service is faster. Absolute figures on a shared 2-core machine are noise; the ratios are the point. ',
    'What each row measures, and how to read them: [Benchmarks](../benchmarks.md#side-by-side-with-the-reference-npm-run-bench).',
    '',
    `- run: ${info.date}${info.quick ? ' (`--quick` sizes)' : ''}, ${info.elapsed}`,
    `- machine: ${info.machine}, Node ${info.node}`,
    `- load average (1/5/15 min): ${info.loadBefore} at the start, ${info.loadAfter} at the end`,
    '',
  ];
  const chart = async (name: string, svg: string, alt: string) => {
    await writeFile(path.join(dir, name), svg);
    page.push(`![${alt}](${name})`, '');
  };
  for (const [store, rows] of results) {
    const where = STORE_NAMES[store];
    const parts = measured(rows);
    if (parts.length === 0) continue;
    page.push(`## ${where[0]?.toUpperCase()}${where.slice(1)}`, '');
    await chart(
      `${store}-ratio.svg`,
      barChart(
        `This service against the reference, ${where}: how many times faster`,
        'times faster (log; the dashed line is 1×)',
        parts.map((m) => {
          const r = speedup(m.ours, m.ref);
          return { label: m.label, bars: [{ value: r, color: r >= 1 ? COLORS.faster : COLORS.slower, text: formatRatio(r) }] };
        }),
        1,
      ),
      `ratio per workload on ${where}`,
    );
    for (const [unit, what, axis] of [
      ['/s', 'throughput', 'per second (log; higher is better)'],
      ['ms', 'latency', 'milliseconds (log; lower is better)'],
    ] as const) {
      const same = parts.filter((m) => m.ours.unit === unit);
      if (same.length === 0) continue;
      await chart(
        `${store}-${what}.svg`,
        barChart(
          `${what[0]?.toUpperCase()}${what.slice(1)}, ${where} (blue: this service, grey: reference)`,
          axis,
          same.map((m) => ({
            label: m.label,
            bars: [
              { value: m.ours.value, color: COLORS.ours, text: formatValue(m.ours) },
              { value: m.ref.value, color: COLORS.ref, text: formatValue(m.ref) },
            ],
          })),
        ),
        `${what} per workload on ${where}`,
      );
    }
    const bySeries = new Map<string, Array<{ n: number; ours: Figure; ref: Figure }>>();
    for (const r of rows) {
      const o = figures(r.outcome.ours)[0];
      const f = figures(r.outcome.ref)[0];
      if (r.scale && o && f) bySeries.set(r.scale.series, [...(bySeries.get(r.scale.series) ?? []), { n: r.scale.n, ours: o, ref: f }]);
    }
    for (const [series, points] of bySeries) {
      if (points.length < 2) continue;
      points.sort((a, b) => a.n - b.n);
      await chart(`${store}-scale-${slug(series)}.svg`, scaleChart(`${series}, ${where}, by catalog size`, points), `${series} by catalog size on ${where}`);
    }
  }
  page.push('## The figures', '', tables.trim(), '', 'The same figures as data: [results.json](results.json).', '');
  await writeFile(path.join(dir, 'results.json'), `${JSON.stringify({ info, results, tables }, null, 1)}\n`);
  const file = path.join(dir, BENCHMARK_PAGE);
  await writeFile(file, `${page.join('\n')}\n`);
  return file;
}
