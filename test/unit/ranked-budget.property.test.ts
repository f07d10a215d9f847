import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { MAX_RANKED_CHARS, withinRankedBudget, type Candidate } from '../../core/recall';
import { episode } from '../support/memories';

const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });

/** A candidate whose text is `chars` long (its words do not matter to the budget). */
function candidate(i: number, chars: number): Candidate {
  const entry = buildEntry(`e${i}`, 'agent', episode('cargo', 1_700_000_000_000 + i), policy);
  return { entry: { ...entry, text: 'x'.repeat(chars) }, tier: 'hot' };
}

describe('the ranked text budget (core/recall.ts, MAX_RANKED_CHARS)', () => {
  it('ranks the candidates read first, within the budget, and counts the rest', () => {
    const size = fc.integer({ min: 1, max: MAX_RANKED_CHARS / 4 });
    fc.assert(
      fc.property(fc.array(size, { maxLength: 40 }), (sizes) => {
        const candidates = sizes.map((chars, i) => candidate(i, chars));
        const { ranked, overBudget } = withinRankedBudget(candidates);
        expect(ranked).toEqual(candidates.slice(0, ranked.length));
        expect(ranked.length + overBudget).toBe(candidates.length);
        const chars = ranked.reduce((n, c) => n + c.entry.text.length, 0);
        expect(chars).toBeLessThanOrEqual(MAX_RANKED_CHARS);
        // It stops only where the next would pass the budget.
        if (overBudget > 0) expect(chars + sizes[ranked.length]!).toBeGreaterThan(MAX_RANKED_CHARS);
      }),
      { numRuns: 50 },
    );
  });

  it('ranks the first candidate however long it is', () => {
    const { ranked, overBudget } = withinRankedBudget([candidate(0, MAX_RANKED_CHARS + 1), candidate(1, 1)]);
    expect(ranked.map((c) => c.entry._id)).toEqual(['e0']);
    expect(overBudget).toBe(1);
  });
});
