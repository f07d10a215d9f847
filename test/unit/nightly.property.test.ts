import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { queryMatches } from '../../core/nightly/plans';
import {
  limitRehydration,
  refreshProposers,
  WANTED_RANK,
  wantedFromCold,
  type Located,
  type LoggedQuery,
} from '../../core/nightly/phases';
import { candidateTerms, MAX_TERM_READS, POSTINGS_BUDGET, rankCandidates } from '../../core/recall';
import type { ReclaimPolicy } from '../../core/nightly/reclaim';

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
    wanted: fc.boolean(),
  });

  it('keeps every hot step and every wanted cold one, and fills only the room below the low watermark with the rest', () => {
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
          const wanted = new Set(raw.filter((s) => s.wanted).map((s) => s.id));
          const kept = new Set(limitRehydration(steps, wanted, hot, policy).map((s) => s.id));
          for (const s of steps) if (s.tier === 'hot' || wanted.has(s.id)) expect(kept.has(s.id)).toBe(true);
          const room = Math.max(0, 80 - hot);
          const wantedCold = steps.filter((s) => s.tier === 'cold' && wanted.has(s.id)).length;
          const matchedOnly = steps.filter((s) => s.tier === 'cold' && !wanted.has(s.id) && kept.has(s.id));
          expect(matchedOnly.length).toBeLessThanOrEqual(Math.max(0, room - wantedCold));
          // Newest writes first: nothing left out is newer than something let in.
          const left = steps.filter((s) => s.tier === 'cold' && !kept.has(s.id));
          for (const l of left)
            for (const k of matchedOnly) expect(l.writtenAt).toBeLessThanOrEqual(k.writtenAt);
        },
      ),
    );
  });
});

describe('wantedFromCold (fast-check)', () => {
  const memory = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
  const NOW = 10 * 24 * 3600_000;
  const locatedArb = fc.record({
    words: fc.subarray(VOCABULARY, { minLength: 1 }),
    tier: fc.constantFrom('hot' as const, 'cold' as const),
    salience: fc.double({ min: 0.01, max: 1, noNaN: true }),
    writtenAt: fc.integer({ min: 0, max: NOW }),
  });

  it('wants only cold hits a recall returned, at most WANTED_RANK per recall, each ranked there by the core', () => {
    fc.assert(
      fc.property(
        fc.array(locatedArb, { minLength: 1, maxLength: 40 }),
        fc.array(fc.record({ terms: fc.subarray(VOCABULARY, { minLength: 1 }), hits: fc.array(fc.nat()) }), {
          maxLength: 5,
        }),
        (raw, rawQueries) => {
          const located = new Map<string, Located>(
            raw.map((r, i) => {
              const entry = buildEntry(
                `e${i}`,
                'agent',
                {
                  text: `${r.words.join(' ')} note`,
                  kind: 'episode',
                  salience: r.salience,
                  source: { origin: 'agent' },
                  confidence: 0.5,
                  verified: false,
                  volatile: false,
                  writtenAt: r.writtenAt,
                },
                memory,
              );
              return [entry._id, { entry, tier: r.tier }];
            }),
          );
          const logged: LoggedQuery[] = rawQueries.map((q) => ({
            terms: q.terms,
            hitIds: [...new Set(q.hits.map((h) => `e${h % raw.length}`))],
            meaningIds: [],
          }));
          const wanted = wantedFromCold(logged, located, NOW, memory);
          for (const id of wanted) {
            expect(located.get(id)!.tier).toBe('cold');
            // Some recall returned it, and ranks it among its best when ranked again now.
            expect(
              logged.some((q) =>
                rankCandidates(
                  q.terms,
                  q.hitIds.map((h) => located.get(h)!),
                  { now: NOW, k: WANTED_RANK, ...memory },
                ).some((hit) => hit.id === id),
              ),
            ).toBe(true);
          }
          const returnedCold = new Set(
            logged.flatMap((q) => q.hitIds).filter((id) => located.get(id)!.tier === 'cold'),
          );
          expect(wanted.size).toBeLessThanOrEqual(Math.min(returnedCold.size, logged.length * WANTED_RANK));
        },
      ),
    );
  });

  it('a cold hit a recall returned with fewer than WANTED_RANK others holding its terms is wanted', () => {
    fc.assert(
      fc.property(fc.array(locatedArb, { minLength: 1, maxLength: WANTED_RANK }), fc.nat(), (raw, pick) => {
        const located = new Map<string, Located>(
          raw.map((r, i) => {
            const entry = buildEntry(
              `e${i}`,
              'agent',
              {
                text: `${r.words.join(' ')} note`,
                kind: 'episode',
                salience: r.salience,
                source: { origin: 'agent' },
                confidence: 0.5,
                verified: false,
                volatile: false,
                writtenAt: r.writtenAt,
              },
              memory,
            );
            return [entry._id, { entry, tier: i === pick % raw.length ? ('cold' as const) : r.tier }];
          }),
        );
        // Every entry holds "note", so the query scores every hit above zero.
        const wanted = wantedFromCold(
          [{ terms: ['note'], hitIds: [...located.keys()], meaningIds: [] }],
          located,
          NOW,
          memory,
        );
        expect(wanted.has(`e${pick % raw.length}`)).toBe(true);
      }),
    );
  });
});

describe('candidateTerms (fast-check)', () => {
  it('reads at most MAX_TERM_READS terms, rarest first, however long the query', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 600 }),
        fc.array(fc.option(fc.integer({ min: 0, max: 1000 }), { nil: undefined }), { maxLength: 600 }),
        fc.constantFrom(POSTINGS_BUDGET.default, POSTINGS_BUDGET.deep),
        (queryTerms, counts, budget) => {
          const df = new Map<string, number>();
          queryTerms.forEach((t, i) => {
            if (counts[i] !== undefined) df.set(t, counts[i]!);
          });
          const chosen = candidateTerms(queryTerms, df, budget);
          expect(chosen.length).toBeGreaterThan(0);
          expect(chosen.length).toBeLessThanOrEqual(MAX_TERM_READS);
          // The documents read are bounded whatever the store and the query.
          expect(chosen.reduce((n, c) => n + c.limit, 0)).toBeLessThanOrEqual(MAX_TERM_READS * budget);
          // Rarest first: no term left out is rarer than one read.
          const rarity = (t: string) => df.get(t) ?? 0;
          const read = new Set(chosen.map((c) => c.term));
          const maxRead = Math.max(...chosen.map((c) => rarity(c.term)));
          for (const t of queryTerms) if (!read.has(t)) expect(rarity(t)).toBeGreaterThanOrEqual(maxRead);
        },
      ),
    );
  });
});
