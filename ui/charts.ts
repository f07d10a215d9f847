import { html } from 'htm/preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/**
 * The browser's charts: stacked series drawn with uPlot (docs/browser.md, Libraries, and why), and
 * the salience decay curve, an exponential the page draws itself in SVG.
 */

const DAY_S = 86_400;

export interface StackedSeries {
  label: string;
  values: number[];
  colour: string;
}

/**
 * Series stacked one on another, as areas over time or as bars over labels. uPlot draws what
 * it is given, so each series is drawn at its running total, top first, each filled down to
 * the axis over the ones above it; the legend reads each series' own value.
 */
export function StackedChart(props: {
  title: string;
  /** Instants (ms) for areas over time; with `labels`, one bar per label. */
  x: number[];
  labels?: string[];
  series: StackedSeries[];
  testId: string;
}) {
  const target = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = target.current;
    if (!element) return;
    const bars = props.labels !== undefined;
    const totals = props.series.map((_, i) =>
      props.x.map((_, j) => props.series.slice(0, i + 1).reduce((sum, s) => sum + (s.values[j] ?? 0), 0)),
    );
    const order = props.series.map((_, i) => i).reverse();
    const chart = new uPlot(
      {
        title: props.title,
        width: Math.max(320, element.clientWidth),
        height: 260,
        scales: {
          // One night is a point: the axis spans a day either side of it.
          x: bars
            ? { time: false, range: [-0.5, props.x.length - 0.5] }
            : {
                time: true,
                ...(props.x.length === 1 && {
                  range: [props.x[0]! / 1000 - DAY_S, props.x[0]! / 1000 + DAY_S],
                }),
              },
          y: { range: (_, __, max) => [0, Math.max(1, max) * 1.05] },
        },
        axes: [
          bars
            ? { values: (_, ticks) => ticks.map((t) => props.labels![t] ?? ''), rotate: -30, size: 90 }
            : {},
          {},
        ],
        series: [
          bars
            ? {
                label: 'arm · budget',
                value: (_: uPlot, j: number | null) => (j === null ? '–' : (props.labels![j] ?? '–')),
              }
            : { label: 'night' },
          ...order.map((i) => ({
            label: props.series[i]!.label,
            stroke: props.series[i]!.colour,
            fill: props.series[i]!.colour,
            value: (_: uPlot, __: number | null, ___: number, index: number | null) =>
              index === null ? '–' : String(props.series[i]!.values[index] ?? 0),
            ...(bars && { paths: uPlot.paths.bars!({ size: [0.7, 48] }), points: { show: false } }),
          })),
        ],
      },
      [bars ? props.x.map((_, j) => j) : props.x.map((t) => t / 1000), ...order.map((i) => totals[i]!)],
      element,
    );
    return () => chart.destroy();
  }, [props]);
  return html`<div class="chart" ref=${target} data-testid=${props.testId}></div>`;
}

/**
 * Salience from now until it falls to the gate, `s · 2^-(t / halfLife)`: the entry is dormant
 * from where the curve meets the gate (core/salience.ts, dormantAt).
 */
export function DecayCurve(props: { salience: number; halfLifeHours: number; gate: number }) {
  const { salience, halfLifeHours, gate } = props;
  const [width, height] = [160, 36];
  const untilGate = salience > gate ? halfLifeHours * Math.log2(salience / gate) : 0;
  const span = Math.max(untilGate * 1.25, halfLifeHours);
  const y = (s: number) => height - 2 - (s / Math.max(salience, gate)) * (height - 4);
  const points = Array.from({ length: 33 }, (_, i) => {
    const hours = (span * i) / 32;
    return `${((width * i) / 32).toFixed(1)},${y(salience * 2 ** (-hours / halfLifeHours)).toFixed(1)}`;
  });
  const days = untilGate / 24;
  const label =
    salience <= gate
      ? 'below the gate'
      : `reaches the gate in ${days >= 1 ? `${days.toFixed(1)} d` : `${untilGate.toFixed(0)} h`}`;
  return html`<span class="decay" title=${`salience ${salience.toFixed(3)}, ${label}`}>
    <svg width=${width} height=${height} viewBox=${`0 0 ${width} ${height}`} role="img" aria-label=${label}>
      <line x1="0" x2=${width} y1=${y(gate)} y2=${y(gate)} class="gate" />
      <polyline points=${points.join(' ')} class="curve" />
    </svg>
    <small>${label}</small>
  </span>`;
}
