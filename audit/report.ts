import type { ReadCondition, SummaryRow } from './records';

/** The audit's summary as a Markdown table and as a self-contained SVG chart. */

function budgetLabel(budget: number | null): string {
  if (budget === null) return 'none';
  return budget % 1000 === 0 ? `${budget / 1000}k` : String(budget);
}

function fixed(n: number | null, digits = 2): string {
  return n === null ? '—' : n.toFixed(digits);
}

function shareCell(r: SummaryRow): string {
  if (r.irreversibleShare === null) return '—';
  const ci = r.interval ? ` [${fixed(r.interval.low)}, ${fixed(r.interval.high)}]` : '';
  return `${fixed(r.irreversibleShare)}${ci}`;
}

function readSettingLabel(r: SummaryRow): string {
  return r.readSetting === 'retained'
    ? 'retained store'
    : r.readSetting === 'hot'
      ? 'hot only'
      : 'deep (hot + cold)';
}

/**
 * One row per arm and budget; the read condition, what the read can reach, the reader and
 * the judge sit beside every figure.
 */
export function renderTable(rows: readonly SummaryRow[]): string {
  const head =
    '| condition | read | reader / judge | budget | arm | errors | irreversible | recoverable | residual | irreversible share [95% CI] | denominator | gold evicted |';
  const rule = '|' + ' --- |'.repeat(12);
  const lines = rows.map((r) =>
    [
      r.condition,
      readSettingLabel(r),
      `${r.reader} / ${r.judge}`,
      budgetLabel(r.budget),
      r.arm,
      r.errors,
      r.irreversible,
      r.condition === 'forced-gold' ? `${r.recoverable}†` : r.recoverable,
      r.residual,
      shareCell(r),
      `${r.denominator}/${r.questions}`,
      `${Math.round(r.goldEvictedRate * 100)}%`,
    ].join(' | '),
  );
  const notes = [
    '',
    'Irreversible share = irreversible / (irreversible + recoverable), with a 95% percentile bootstrap interval over questions.',
    'The denominator counts the questions the reader answers when handed the clean gold.',
    '† forced-gold: recoverable is 0 by construction (every surviving gold unit is already in the context), not a finding; memgate read hot-only is the exception, its recoverable errors are gold kept in cold.',
  ];
  return [head, rule, ...lines.map((l) => `| ${l} |`), ...notes].join('\n') + '\n';
}

const COLOURS = { irreversible: '#c0392b', recoverable: '#e59e2d', residual: '#8c8c8c', correct: '#dfeee0' };

function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/**
 * Panels by budget (rows) and read condition (columns); in each, one bar per arm splitting
 * the denominator into irreversible, recoverable, residual and correct, with the irreversible
 * share written beside it.
 */
export function renderChart(rows: readonly SummaryRow[], title: string): string {
  const budgets = [...new Set(rows.map((r) => r.budget).filter((b): b is number => b !== null))].sort(
    (a, b) => b - a,
  );
  const conditions: ReadCondition[] = ['top-60', 'forced-gold'];
  const panelRows = (condition: ReadCondition, budget: number) =>
    rows.filter((r) => r.condition === condition && (r.budget === budget || r.budget === null));
  const armsPerPanel = Math.max(1, ...budgets.map((b) => panelRows('top-60', b).length));
  const bar = 16;
  const gap = 5;
  const labelWidth = 120;
  const barWidth = 260;
  const shareWidth = 150;
  const panelWidth = labelWidth + barWidth + shareWidth;
  const panelHeight = 28 + armsPerPanel * (bar + gap);
  const top = 78;
  const width = 20 + conditions.length * (panelWidth + 20);
  const height = top + budgets.length * (panelHeight + 18) + 30;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="20" y="26" font-size="16" font-weight="bold">${escapeXml(title)}</text>`,
  ];
  let lx = 20;
  for (const [name, colour] of Object.entries(COLOURS)) {
    out.push(
      `<rect x="${lx}" y="40" width="12" height="12" fill="${colour}" stroke="#555" stroke-width="0.5"/>`,
    );
    out.push(`<text x="${lx + 16}" y="50">${name}</text>`);
    lx += 30 + name.length * 7;
  }
  out.push(
    `<text x="${lx + 10}" y="50" fill="#444">bars: share of the denominator · right: irreversible share [95% CI]</text>`,
  );
  budgets.forEach((budget, bi) => {
    conditions.forEach((condition, ci) => {
      const x0 = 20 + ci * (panelWidth + 20);
      const y0 = top + bi * (panelHeight + 18);
      const reader = panelRows(condition, budget)[0];
      const heading = `${budgetLabel(budget)} tokens · ${condition}${reader ? ` · ${reader.reader} / ${reader.judge}` : ''}`;
      out.push(`<text x="${x0}" y="${y0 + 14}" font-weight="bold">${escapeXml(heading)}</text>`);
      panelRows(condition, budget).forEach((r, i) => {
        const y = y0 + 24 + i * (bar + gap);
        out.push(
          `<text x="${x0 + labelWidth - 6}" y="${y + 12}" text-anchor="end">${escapeXml(r.arm)}</text>`,
        );
        const correct = r.denominator - r.errors;
        let x = x0 + labelWidth;
        for (const [name, count] of [
          ['irreversible', r.irreversible],
          ['recoverable', r.recoverable],
          ['residual', r.residual],
          ['correct', correct],
        ] as const) {
          const w = r.denominator ? (count / r.denominator) * barWidth : 0;
          if (w > 0)
            out.push(
              `<rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${bar}" fill="${COLOURS[name]}"><title>${escapeXml(`${r.arm}: ${count} ${name} of ${r.denominator}`)}</title></rect>`,
            );
          x += w;
        }
        out.push(
          `<rect x="${x0 + labelWidth}" y="${y}" width="${barWidth}" height="${bar}" fill="none" stroke="#999" stroke-width="0.5"/>`,
        );
        const share =
          r.irreversibleShare === null
            ? 'no flipped errors'
            : `${fixed(r.irreversibleShare)}${r.interval ? ` [${fixed(r.interval.low)}, ${fixed(r.interval.high)}]` : ''}`;
        out.push(`<text x="${x0 + labelWidth + barWidth + 8}" y="${y + 12}">${escapeXml(share)}</text>`);
      });
    });
  });
  out.push(
    `<text x="20" y="${height - 10}" fill="#444">forced-gold: recoverable is 0 by construction, but for gold memgate kept in cold. memgate (deep) reads hot + cold; memgate (hot) reads the hot tier only.</text>`,
  );
  out.push('</svg>');
  return out.join('\n') + '\n';
}
