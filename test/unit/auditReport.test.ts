import { describe, expect, it } from 'vitest';
import { renderChart, renderTable } from '../../audit/report';
import { classify, summariseAudit, type AuditRecord, type QuestionVerdicts } from '../../audit/records';

function record(
  questionId: string,
  arm: AuditRecord['arm'],
  budget: number | null,
  condition: AuditRecord['condition'],
  v: Partial<QuestionVerdicts>,
): AuditRecord {
  const verdicts = { cleanGold: true, policy: false, restored: true, goldDeleted: 0, ...v };
  return {
    _id: `${questionId}:${arm}:${budget}:${condition}`,
    runId: 'r',
    questionId,
    questionType: 'multi-session',
    policy: arm === 'no-eviction' ? 'no-eviction' : 'fifo',
    arm,
    budget,
    readSetting: 'retained',
    condition,
    ranker: 'bm25',
    reader: 'evidence',
    judge: 'match',
    store: { units: 10, tokens: 1000, reachableUnits: 5, reachableTokens: 500 },
    gold: { units: 2, evicted: verdicts.goldDeleted, deleted: verdicts.goldDeleted },
    contextUnits: 5,
    restoredTokens: 40,
    verdicts: {
      ...classify(verdicts),
      cleanGold: verdicts.cleanGold,
      policy: verdicts.policy,
      restored: verdicts.restored,
      checks: null,
    },
    answers: { policy: "I don't know", restored: 'x' },
    at: 0,
  };
}

const records = [
  record('q1', 'fifo', 8000, 'top-60', { goldDeleted: 1 }),
  record('q2', 'fifo', 8000, 'top-60', {}),
  record('q3', 'fifo', 8000, 'top-60', { policy: true }),
  record('q1', 'fifo', 8000, 'forced-gold', { goldDeleted: 1 }),
  record('q1', 'no-eviction', null, 'top-60', { policy: true }),
];

describe('audit report', () => {
  it('puts the read condition, read setting, reader and judge beside every figure', () => {
    const table = renderTable(summariseAudit(records));
    const rows = table.split('\n').filter((l) => l.startsWith('| top-60') || l.startsWith('| forced-gold'));
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row).toContain('| retained store | evidence / match |');
    const fifo = rows.find((r) => r.startsWith('| top-60') && r.includes('| fifo |'))!;
    // errors 2, irreversible 1, recoverable 1, residual 0, share 0.50, denominator 3/3.
    expect(fifo).toMatch(/\| 8k \| fifo \| 2 \| 1 \| 1 \| 0 \| 0\.50 \[\d\.\d\d, \d\.\d\d\] \| 3\/3 \|/);
    expect(rows.find((r) => r.startsWith('| forced-gold'))).toContain('| 0† |');
    expect(table).toContain('by construction');
  });

  it('draws a self-contained SVG with one bar per arm and budget panel', () => {
    const svg = renderChart(summariseAudit(records), 'Audit <test> & co');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trim().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('Audit &lt;test&gt; &amp; co');
    expect(svg).toContain('8k tokens · top-60 · evidence / match');
    expect(svg).not.toMatch(/href=|<script/);
    expect(svg).toContain('fifo: 1 irreversible of 3');
  });
});
