import type { TableVersion } from './api.js';
import { formatBytes, formatCount, formatTime } from './format.js';

// Rows and manifest bytes of the versions on screen, oldest left: an SVG drawn from the numbers
// the page already has (no chart library, nothing fetched for it).

/** What the timeline learnt of one version besides its listing. */
export interface VersionDetail {
  operation?: string | undefined;
  rows?: number | undefined;
  error?: string | undefined;
}

const W = 900;
const H = 220;
const PAD = { left: 64, right: 72, top: 16, bottom: 28 };

/** A round upper bound for an axis (1, 2 or 5 times a power of ten). */
function niceMax(max: number): number {
  if (max <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

export function VersionChart({ versions, details }: { versions: TableVersion[]; details: ReadonlyMap<number, VersionDetail> }) {
  const points = [...versions].sort((a, b) => a.version - b.version);
  const n = points.length;
  const x = (i: number) => PAD.left + (n === 1 ? (W - PAD.left - PAD.right) / 2 : (i * (W - PAD.left - PAD.right)) / (n - 1));
  const rowsOf = (v: TableVersion) => details.get(v.version)?.rows;
  const rowsMax = niceMax(Math.max(0, ...points.map((v) => rowsOf(v) ?? 0)));
  const bytesMax = niceMax(Math.max(0, ...points.map((v) => v.manifest_size ?? 0)));
  const yRows = (r: number) => H - PAD.bottom - (r / rowsMax) * (H - PAD.top - PAD.bottom);
  const yBytes = (b: number) => H - PAD.bottom - (b / bytesMax) * (H - PAD.top - PAD.bottom);
  const line = (values: Array<[number, number | undefined]>) =>
    values
      .filter((p): p is [number, number] => p[1] !== undefined)
      .map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`)
      .join(' ');
  const rowsLine = line(points.map((v, i) => [x(i), rowsOf(v) === undefined ? undefined : yRows(rowsOf(v) as number)]));
  const bytesLine = line(points.map((v, i) => [x(i), v.manifest_size === undefined ? undefined : yBytes(v.manifest_size)]));
  const ticks = [0, 0.5, 1];
  const labelEvery = Math.max(1, Math.ceil(n / 10));
  return (
    <figure class="chart" data-testid="version-chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`rows and manifest bytes of versions ${points[0]?.version} to ${points[n - 1]?.version}`}>
        {ticks.map((t) => (
          <g key={t}>
            <line class="grid-line" x1={PAD.left} x2={W - PAD.right} y1={yRows(t * rowsMax)} y2={yRows(t * rowsMax)} />
            <text class="axis rows-axis" x={PAD.left - 6} y={yRows(t * rowsMax) + 4} text-anchor="end">
              {formatCount(t * rowsMax)}
            </text>
            <text class="axis bytes-axis" x={W - PAD.right + 6} y={yBytes(t * bytesMax) + 4} text-anchor="start">
              {formatBytes(Math.round(t * bytesMax))}
            </text>
          </g>
        ))}
        {points.map((v, i) =>
          i % labelEvery === 0 || i === n - 1 ? (
            <text key={v.version} class="axis" x={x(i)} y={H - 8} text-anchor="middle">
              {v.version}
            </text>
          ) : null,
        )}
        <polyline class="series-bytes" points={bytesLine} />
        <polyline class="series-rows" points={rowsLine} />
        {points.map((v, i) => {
          const rows = rowsOf(v);
          return rows === undefined ? null : (
            <circle key={v.version} class="dot-rows" cx={x(i)} cy={yRows(rows)} r={3}>
              <title>{`version ${v.version} (${formatTime(v.timestamp_millis)}): ${formatCount(rows)} rows, manifest ${v.manifest_size !== undefined ? formatBytes(v.manifest_size) : 'size unknown'}`}</title>
            </circle>
          );
        })}
      </svg>
      <figcaption>
        <span class="legend legend-rows">rows</span> <span class="legend legend-bytes">manifest bytes</span>
        <span class="muted small">
          {' '}
          — versions {points[0]?.version}–{points[n - 1]?.version} (those shown below)
        </span>
      </figcaption>
    </figure>
  );
}
