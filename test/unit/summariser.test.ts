import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assessSummary, buildSummaryEntry } from '../../core/nightly/clusters';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { extractiveSummary, extractiveSummariser, sentences } from '../../llm/summariser';

const NAMES = ['Anna Berg', 'Acme Corp', 'Berlin', 'Dr Okafor', 'Globex', 'Lisbon'];
const UNITS = ['days', 'hours', 'weeks', 'requests', 'seats', 'GB'];
const MONTHS = ['January', 'March', 'May', 'October'];

/** Fact-like sentences: names, quantities with units, dates, money and percentages. */
const factSentence = fc
  .record({
    name: fc.constantFrom(...NAMES),
    qty: fc.integer({ min: 1, max: 5000 }),
    unit: fc.constantFrom(...UNITS),
    date: fc.option(
      fc.tuple(
        fc.constantFrom(...MONTHS),
        fc.integer({ min: 1, max: 28 }),
        fc.integer({ min: 2020, max: 2030 }),
      ),
      {
        nil: undefined,
      },
    ),
    money: fc.option(fc.integer({ min: 1, max: 99999 }), { nil: undefined }),
    percent: fc.option(fc.integer({ min: 1, max: 99 }), { nil: undefined }),
    end: fc.constantFrom('.', '!', ''),
  })
  .map((r) => {
    let s = `${r.name} agreed to ${r.qty} ${r.unit}`;
    if (r.date) s += ` starting ${r.date[0]} ${r.date[1]}, ${r.date[2]}`;
    if (r.money) s += ` for $${r.money}`;
    if (r.percent) s += ` with a ${r.percent}% discount`;
    return s + r.end;
  });

const sourcesArb = fc.array(factSentence, { minLength: 1, maxLength: 8 }).chain((pool) =>
  fc
    .array(fc.subarray(pool, { minLength: 1, maxLength: Math.min(3, pool.length) }), {
      minLength: 2,
      maxLength: 5,
    })
    .map((picks) =>
      picks.map((ss, i) => ({
        id: `s${i}`,
        text: ss.map((s) => (/[.!?]$/.test(s) ? s : `${s}.`)).join(' '),
      })),
    ),
);

describe('the extractive summariser', () => {
  it('keeps each distinct sentence once, in source order', () => {
    const text = extractiveSummary([
      { id: 'a', text: "The supplier's notice period is 30 days. Invoices are due monthly." },
      { id: 'b', text: "The supplier's  notice period is 30 days. Penalties apply after 14 days." },
    ]);
    expect(text).toBe(
      "- The supplier's notice period is 30 days. Invoices are due monthly.\n- Penalties apply after 14 days.",
    );
    expect(sentences(text.replace(/^- /gm, ''))).toHaveLength(3);
  });

  it('is lossless by construction: the atom check finds every fact of every source', async () => {
    await fc.assert(
      fc.asyncProperty(sourcesArb, async (sources) => {
        const text = await extractiveSummariser.summarise(sources);
        const assessment = assessSummary(sources, text);
        expect(assessment.lossyReasons).toEqual([]);
        expect(assessment.lossy).toBe(false);
      }),
    );
  });

  it('a summary that drops a fact is flagged lossy and names the missing atom (docs/invariants.md, Lossy unless proven)', () => {
    fc.assert(
      fc.property(sourcesArb, fc.nat(), (sources, pick) => {
        const full = extractiveSummary(sources);
        const lines = full.split('\n');
        const dropped = lines.filter((_, i) => i !== pick % lines.length).join('\n');
        const assessment = assessSummary(sources, dropped);
        const keepsAll = sources.every((s) => assessSummary([s], dropped).lossless.get(s.id));
        expect(assessment.lossy).toBe(!keepsAll);
        for (const [id, ok] of assessment.lossless) {
          expect(assessment.lossyReasons.some((r) => r.startsWith(`${id}: `))).toBe(!ok);
        }
      }),
    );
  });

  it('the 14-versus-30-day summary is lossy for the 30-day fact', () => {
    const a = assessSummary(
      [{ id: 'fact', text: "The supplier's contractual notice period is 30 days." }],
      "Earlier draft: the supplier's notice period is 14 days.",
    );
    expect(a.lossy).toBe(true);
    expect(a.lossyReasons).toContain('fact: qty:30 day');
  });
});

describe('summary entries', () => {
  const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
  const source = (id: string, text: string, writtenAt: number, salience: number) =>
    buildEntry(
      id,
      'agent',
      {
        text,
        kind: 'fact',
        salience,
        source: { origin: 'user' },
        confidence: 0.8,
        verified: false,
        volatile: false,
        writtenAt,
      },
      policy,
    );

  it('always carry lossy_summary, with the reasons when lossy, and name their sources', () => {
    const sources = [
      source('a', 'Notice period is 30 days.', 0, 0.9),
      source('b', 'Notice period is 30 days!', 1, 0.3),
    ];
    const text = extractiveSummary(sources.map((s) => ({ id: s._id, text: s.text })));
    const lossless = buildSummaryEntry(
      'sum',
      sources,
      text,
      assessSummary(
        sources.map((s) => ({ id: s._id, text: s.text })),
        text,
      ),
      {
        asOf: 10,
        runId: 'run',
        policy,
      },
    );
    expect(lossless).toMatchObject({
      kind: 'summary',
      lossy_summary: false,
      derivedFrom: ['a', 'b'],
      source: { origin: 'consolidation', ref: 'run' },
    });
    expect(lossless.lossyReasons).toBeUndefined();
    const lossy = buildSummaryEntry(
      'sum',
      sources,
      'Notice period is 14 days.',
      assessSummary(
        sources.map((s) => ({ id: s._id, text: s.text })),
        'Notice period is 14 days.',
      ),
      {
        asOf: 10,
        runId: 'run',
        policy,
      },
    );
    expect(lossy.lossy_summary).toBe(true);
    expect(lossy.lossyReasons).toEqual(['a: qty:30 day', 'b: qty:30 day']);
  });
});
