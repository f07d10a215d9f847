import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { rankCandidates } from '../../core/recall';
import { terms } from '../../core/text';
// The benchmark's pure metrics are tested like any other pure code; nothing ships them.
// eslint-disable-next-line @typescript-eslint/no-restricted-imports
import * as m from '../../bench/retrievalMetrics';

const VOCABULARY = ['budget', 'supplier', 'invoices', 'invoice', 'deploy', 'the', 'limits', 'throttling'];
const text = fc
  .array(fc.constantFrom(...VOCABULARY), { minLength: 1, maxLength: 12 })
  .map((w) => w.join(' '));
const IDS = Array.from({ length: 30 }, (_, i) => `t${i}`);
/** A ranking (some ids in some order) and a non-empty relevant set. */
const judged = fc.record({
  ranking: fc.shuffledSubarray(IDS),
  relevant: fc.subarray(IDS, { minLength: 1 }).map((r) => new Set(r)),
});
const scores = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 40 });

describe('bm25Ranking', () => {
  it('ranks only documents sharing a term, rarer and denser matches first, ties to the later one', () => {
    const ranking = m.bm25Ranking('supplier invoices', [
      { id: 'a', text: 'the supplier sent nothing' },
      { id: 'b', text: 'the weather is fine' },
      { id: 'c', text: 'invoice from the supplier, invoice attached' },
      { id: 'd', text: 'the supplier sent nothing' },
    ]);
    expect(ranking.map((r) => r.id)).toEqual(['c', 'd', 'a']);
    expect(ranking.every((r) => r.score > 0)).toBe(true);
  });

  it("orders the candidates exactly as recall's rankCandidates does at equal salience (fast-check)", () => {
    const memory = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
    const now = 1_000_000;
    fc.assert(
      fc.property(text, fc.array(text, { minLength: 1, maxLength: 25 }), (query, docs) => {
        const candidates = docs.map((t, i) => {
          const entry = buildEntry(
            `d${i}`,
            'agent',
            {
              text: t,
              kind: 'episode',
              salience: 1,
              source: { origin: 'agent' },
              confidence: 0.5,
              verified: false,
              volatile: false,
              writtenAt: i,
            },
            memory,
          );
          // Salience 1 at `now` for every entry: recall's score is then its bare BM25.
          entry.salience = { base: 1, at: now };
          return { entry, tier: 'hot' as const };
        });
        const queryTerms = terms(query);
        const sharing = candidates.filter((c) => c.entry.terms.some((t) => queryTerms.includes(t)));
        const recalled = rankCandidates(queryTerms, sharing, { now, k: docs.length, ...memory });
        const ranked = m.bm25Ranking(
          query,
          docs.map((t, i) => ({ id: `d${i}`, text: t })),
        );
        expect(ranked.map((r) => r.id)).toEqual(recalled.map((h) => h.id));
      }),
    );
  });
});

describe('cosineRanking', () => {
  it('puts the most similar vector first, ties in input order', () => {
    const v = (...xs: number[]) => Float32Array.from(xs);
    const ranking = m.cosineRanking(v(1, 0), [
      { id: 'far', vector: v(0, 1) },
      { id: 'near', vector: v(0.8, 0.6) },
      { id: 'same', vector: v(1, 0) },
      { id: 'far2', vector: v(0, 1) },
    ]);
    expect(ranking.map((r) => r.id)).toEqual(['same', 'near', 'far', 'far2']);
    expect(ranking.map((r) => r.similarity)).toEqual([1, expect.closeTo(0.8, 6), 0, 0]);
  });
});

describe('rank metrics', () => {
  it('score a known ranking', () => {
    const relevant = new Set(['b', 'x']);
    const ranking = ['a', 'b', 'c'];
    expect(m.recallAt(ranking, relevant, 1)).toBe(0);
    expect(m.recallAt(ranking, relevant, 2)).toBe(0.5);
    expect(m.recallAnyAt(ranking, relevant, 2)).toBe(1);
    expect(m.recallAllAt(ranking, relevant, 3)).toBe(0);
    // DCG 1/log2(3) over the ideal 1 + 1/log2(3).
    expect(m.ndcgAt(ranking, relevant, 10)).toBeCloseTo(1 / Math.log2(3) / (1 + 1 / Math.log2(3)), 12);
    expect(m.ndcgAt(['x', 'b', 'a'], relevant, 10)).toBe(1);
  });

  it('refuse an empty relevant set', () => {
    expect(() => m.recallAt(['a'], new Set(), 5)).toThrow(InvalidInputError);
    expect(() => m.ndcgAt(['a'], new Set(), 5)).toThrow(InvalidInputError);
  });

  it('stay in [0, 1]; recall and its any/all forms grow with k; all ≤ fraction ≤ any (fast-check)', () => {
    fc.assert(
      fc.property(judged, fc.integer({ min: 1, max: 35 }), ({ ranking, relevant }, k) => {
        const ndcg = m.ndcgAt(ranking, relevant, k);
        expect(ndcg).toBeGreaterThanOrEqual(0);
        expect(ndcg).toBeLessThanOrEqual(1 + 1e-12);
        for (const metric of [m.recallAt, m.recallAllAt, m.recallAnyAt]) {
          expect(metric(ranking, relevant, k)).toBeLessThanOrEqual(metric(ranking, relevant, k + 1));
        }
        const fraction = m.recallAt(ranking, relevant, k);
        expect(m.recallAllAt(ranking, relevant, k)).toBeLessThanOrEqual(fraction);
        expect(fraction).toBeLessThanOrEqual(m.recallAnyAt(ranking, relevant, k));
      }),
    );
  });

  it('give NDCG 1 exactly when the top k holds as many relevant ids as it can (fast-check)', () => {
    fc.assert(
      fc.property(judged, fc.integer({ min: 1, max: 35 }), ({ ranking, relevant }, k) => {
        const best = Math.min(k, relevant.size);
        const ideal = ranking.slice(0, best).every((id) => relevant.has(id)) && ranking.length >= best;
        expect(Math.abs(m.ndcgAt(ranking, relevant, k) - 1) < 1e-12).toBe(ideal);
      }),
    );
  });
});

describe('pairedBootstrapCI', () => {
  it('is [0, 0] for identical arms (fast-check)', () => {
    fc.assert(
      fc.property(scores, fc.nat(), (a, seed) => {
        expect(m.pairedBootstrapCI(a, [...a], { resamples: 200, seed })).toEqual([0, 0]);
      }),
    );
  });

  it('is ordered and lies between the smallest and the largest paired difference (fast-check)', () => {
    fc.assert(
      fc.property(scores, scores, fc.nat(), (raw, other, seed) => {
        const a = raw;
        const b = a.map((x, i) => other[i % other.length]! - x / 2);
        const diffs = a.map((x, i) => b[i]! - x);
        const [lo, hi] = m.pairedBootstrapCI(a, b, { resamples: 500, seed });
        expect(lo).toBeLessThanOrEqual(hi);
        expect(lo).toBeGreaterThanOrEqual(Math.min(...diffs) - 1e-12);
        expect(hi).toBeLessThanOrEqual(Math.max(...diffs) + 1e-12);
      }),
    );
  });

  it('repeats itself for a seed, and refuses unpaired arms', () => {
    const a = [0, 0.5, 1, 1, 0.5];
    const b = [1, 0.5, 1, 0, 1];
    const once = m.pairedBootstrapCI(a, b, { resamples: 1000, seed: 7 });
    expect(m.pairedBootstrapCI(a, b, { resamples: 1000, seed: 7 })).toEqual(once);
    // The observed mean difference, 0.1, lies inside.
    expect(once[0]).toBeLessThan(0.1);
    expect(once[1]).toBeGreaterThan(0.1);
    expect(() => m.pairedBootstrapCI(a, b.slice(1), { resamples: 10, seed: 1 })).toThrow(InvalidInputError);
  });
});
