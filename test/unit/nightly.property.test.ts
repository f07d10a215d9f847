import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { queryMatches } from '../../core/lifecycle';
import { limitRehydration, refreshProposers } from '../../core/nightly';
import type { ReclaimPolicy } from '../../core/reclaim';

const VOCABULARY = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
const BUDGET = 10;

describe('refreshProposers (fast-check)', () => {
  it('every entry a query matches holds a proposer, or only terms too common to read', () => {
    fc.assert(
      fc.property(
        fc.subarray(VOCABULARY, { minLength: 1 }),
        fc.subarray(VOCABULARY, { minLength: 1 }),
        fc.array(fc.integer({ min: 0, max: 2 * BUDGET }), {
          minLength: VOCABULARY.length,
          maxLength: VOCABULARY.length,
        }),
        (query, entry, counts) => {
          const df = new Map(VOCABULARY.map((t, i) => [t, counts[i]!]));
          fc.pre(queryMatches(query, new Set(entry)));
          const proposers = new Set(refreshProposers(query, df, BUDGET));
          const shared = entry.filter((t) => query.includes(t));
          // Missed only through a term skipped for being held by more entries than a read takes.
          if (!shared.some((t) => proposers.has(t)))
            expect(shared.some((t) => df.get(t)! > BUDGET)).toBe(true);
          // Never more than ⌊n/2⌋ + 1 reads, and never a term over the budget.
          expect(proposers.size).toBeLessThanOrEqual(Math.floor(query.length / 2) + 1);
          for (const t of proposers) expect(df.get(t)!).toBeLessThanOrEqual(BUDGET);
        },
      ),
    );
  });

  it('with every term readable, an entry the query matches holds one of the proposers', () => {
    fc.assert(
      fc.property(
        fc.subarray(VOCABULARY, { minLength: 1 }),
        fc.subarray(VOCABULARY, { minLength: 1 }),
        fc.array(fc.integer({ min: 0, max: BUDGET }), {
          minLength: VOCABULARY.length,
          maxLength: VOCABULARY.length,
        }),
        (query, entry, counts) => {
          const df = new Map(VOCABULARY.map((t, i) => [t, counts[i]!]));
          fc.pre(queryMatches(query, new Set(entry)));
          const proposers = refreshProposers(query, df, BUDGET);
          expect(entry.some((t) => proposers.includes(t))).toBe(true);
        },
      ),
    );
  });
});

describe('limitRehydration (fast-check)', () => {
  const policy = { hotCapacity: 100, highWatermark: 1, lowWatermark: 0.8 } as ReclaimPolicy;
  const stepArb = fc.record({
    id: fc.uuid(),
    tier: fc.constantFrom('hot' as const, 'cold' as const),
    writtenAt: fc.integer({ min: 0, max: 1000 }),
    returned: fc.boolean(),
  });

  it('keeps every hot step and every returned cold one, and fills only the room below the low watermark with the rest', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(stepArb, { selector: (s) => s.id }),
        fc.integer({ min: 0, max: 120 }),
        (raw, hot) => {
          const steps = raw.map(({ id, tier, writtenAt }) => ({
            id,
            tier,
            writtenAt,
            salience: { base: 1, at: 0 },
            dormantAt: 1,
          }));
          const returned = new Set(raw.filter((s) => s.returned).map((s) => s.id));
          const kept = new Set(limitRehydration(steps, returned, hot, policy).map((s) => s.id));
          for (const s of steps)
            if (s.tier === 'hot' || returned.has(s.id)) expect(kept.has(s.id)).toBe(true);
          const room = Math.max(0, 80 - hot);
          const returnedCold = steps.filter((s) => s.tier === 'cold' && returned.has(s.id)).length;
          const matchedOnly = steps.filter((s) => s.tier === 'cold' && !returned.has(s.id) && kept.has(s.id));
          expect(matchedOnly.length).toBeLessThanOrEqual(Math.max(0, room - returnedCold));
          // Newest writes first: nothing left out is newer than something let in.
          const left = steps.filter((s) => s.tier === 'cold' && !kept.has(s.id));
          for (const l of left)
            for (const k of matchedOnly) expect(l.writtenAt).toBeLessThanOrEqual(k.writtenAt);
        },
      ),
    );
  });
});
