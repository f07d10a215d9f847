import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy, type MemoryPolicy } from '../../core/entry';
import { fuseScores, LEXICAL_WEIGHT, semanticShare } from '../../core/hybrid';
import { couldEnterTopK, rankHybrid, scoreLexical, type Candidate } from '../../core/recall';
import { HOUR_MS } from '../../core/salience';
import { terms } from '../../core/text';

const FLOOR = 0.8;
const ids = fc.uniqueArray(fc.constantFrom(...'abcdefghijklmnop'.split('')), { maxLength: 12 });
const lexicalList = ids.chain((xs) =>
  fc.tuple(
    ...xs.map((id) =>
      fc.record({ id: fc.constant(id), score: fc.double({ min: 0.01, max: 30, noNaN: true }) }),
    ),
  ),
);
const semanticList = ids.chain((xs) =>
  fc.tuple(
    ...xs.map((id) =>
      fc.record({ id: fc.constant(id), similarity: fc.double({ min: 0.5, max: 1, noNaN: true }) }),
    ),
  ),
);

describe('fuseScores (core/hybrid.ts)', () => {
  it('holds each id once, says how it was found, and keeps relevance in [0, 1], best first (fast-check)', () => {
    fc.assert(
      fc.property(lexicalList, semanticList, (lexical, semantic) => {
        const fused = fuseScores(lexical, semantic, FLOOR);
        const lex = new Set(lexical.map((l) => l.id));
        const sem = new Set(semantic.filter((s) => s.similarity >= FLOOR).map((s) => s.id));
        expect(new Set(fused.map((f) => f.id))).toEqual(new Set([...lex, ...sem]));
        expect(fused).toHaveLength(new Set([...lex, ...sem]).size);
        for (const f of fused) {
          expect(f.foundBy).toBe(
            lex.has(f.id) && sem.has(f.id) ? 'both' : lex.has(f.id) ? 'lexical' : 'semantic',
          );
          expect(f.relevance).toBeGreaterThanOrEqual(0);
          expect(f.relevance).toBeLessThanOrEqual(1 + 1e-12);
        }
        for (let i = 1; i < fused.length; i++)
          expect(fused[i - 1]!.relevance).toBeGreaterThanOrEqual(fused[i]!.relevance);
      }),
    );
  });

  it('without neighbours keeps the lexical order, each score a share of the best (fast-check)', () => {
    fc.assert(
      fc.property(lexicalList, (lexical) => {
        const sorted = [...lexical].sort((a, b) => b.score - a.score);
        const fused = fuseScores(sorted, [], FLOOR);
        expect(fused.map((f) => f.id)).toEqual(sorted.map((l) => l.id));
        if (sorted.length) expect(fused[0]!.relevance).toBeCloseTo(LEXICAL_WEIGHT, 12);
      }),
    );
  });

  it('drops a neighbour below the floor, and a strong match in both lists outranks one found by either alone', () => {
    const fused = fuseScores(
      [
        { id: 'answer', score: 9 },
        { id: 'one-word', score: 3 },
      ],
      [
        { id: 'answer', similarity: 0.9 },
        { id: 'paraphrase', similarity: 0.88 },
        { id: 'unrelated', similarity: 0.7 },
      ],
      FLOOR,
    );
    expect(fused.map((f) => [f.id, f.foundBy])).toEqual([
      ['answer', 'both'],
      ['paraphrase', 'semantic'],
      ['one-word', 'lexical'],
    ]);
    expect(fused[0]!.relevance).toBeCloseTo(1, 12);
    expect(fused[1]!.relevance).toBeCloseTo(0.5 * 0.8, 12);
    expect(fused[2]!.relevance).toBeCloseTo(0.5 / 3, 12);
  });

  it('gives every similarity at the floor its full share, rather than dividing by nothing', () => {
    const fused = fuseScores([], [{ id: 'x', similarity: FLOOR }], FLOOR);
    expect(fused).toEqual([{ id: 'x', relevance: 1 - LEXICAL_WEIGHT, foundBy: 'semantic' }]);
  });
});

/** A hot episode the agent wrote, as recall finds it. */
function hotEpisode(
  id: string,
  text: string,
  salience: number,
  writtenAt: number,
  policy: MemoryPolicy,
): Candidate {
  const input = {
    text,
    kind: 'episode' as const,
    salience,
    source: { origin: 'agent' as const },
    confidence: 0.5,
    verified: false,
    volatile: false,
    writtenAt,
  };
  return { entry: buildEntry(id, 'agent', input, policy), tier: 'hot' };
}

describe('rankHybrid (core/recall.ts)', () => {
  const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
  const now = 100 * HOUR_MS;
  const candidate = (id: string, text: string, salience: number, writtenAt: number) =>
    hotEpisode(id, text, salience, writtenAt, policy);

  // The case reciprocal-rank fusion got wrong: it gave the answer and a fresher note that
  // shares one word nearly equal relevance, and salience then put the note first.
  it('keeps the entry that answers above a fresher, more salient note that shares one word', () => {
    const answer = candidate(
      'answer',
      "The supplier's notice period is 14 days.",
      0.9,
      now - 8 * 24 * HOUR_MS,
    );
    const note = candidate('note', 'Note about the elevator maintenance notice.', 0.7, now - 24 * HOUR_MS);
    const query = terms("What is the supplier's notice period?");
    const hits = rankHybrid(scoreLexical(query, [answer, note]), [{ candidate: answer, similarity: 0.9 }], {
      now,
      k: 10,
      minSimilarity: FLOOR,
      ...policy,
    });
    expect(hits.map((h) => [h.id, h.foundBy])).toEqual([
      ['answer', 'both'],
      ['note', 'lexical'],
    ]);
    expect(hits[0]!.similarity).toBe(0.9);
    expect(hits[1]!.similarity).toBeUndefined();
  });
});

describe("hybrid recall's stopping rule", () => {
  it('bounds what a neighbour that shares no word could score: no read it skips would have entered the top k (fast-check)', () => {
    const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
    const now = 1_000 * HOUR_MS;
    const entry = (i: number, salience: number, age: number) =>
      hotEpisode(`e${i}`, `note ${i}`, salience, now - age * HOUR_MS, policy);
    const neighbour = fc.record({
      salience: fc.double({ min: 0.01, max: 1, noNaN: true }),
      age: fc.integer({ min: 0, max: 200 }),
      similarity: fc.double({ min: FLOOR, max: 1, noNaN: true }),
    });
    fc.assert(
      fc.property(
        fc.array(neighbour, { minLength: 2, maxLength: 30 }),
        fc.integer({ min: 1, max: 10 }),
        (rows, k) => {
          const all = rows
            .map((r, i) => ({ candidate: entry(i, r.salience, r.age), similarity: r.similarity }))
            .sort((a, b) => b.similarity - a.similarity);
          const best = all[0]!.similarity;
          const opts = { now, k, minSimilarity: FLOOR, bestSimilarity: best, ...policy };
          const full = rankHybrid([], all, opts);
          // Read nearest first, stopping where the rule says; the answer must be the same.
          const read: typeof all = [];
          for (const n of all) {
            if (!couldEnterTopK(rankHybrid([], read, opts), k, semanticShare(n.similarity, FLOOR, best)))
              break;
            read.push(n);
          }
          expect(rankHybrid([], read, opts).map((h) => h.id)).toEqual(full.map((h) => h.id));
        },
      ),
    );
  });

  it('gives the best similarity the whole semantic share and the floor none', () => {
    expect(semanticShare(0.9, 0.8, 0.9)).toBeCloseTo(1 - LEXICAL_WEIGHT, 12);
    expect(semanticShare(0.8, 0.8, 0.9)).toBe(0);
    expect(semanticShare(0.85, 0.8, 0.9)).toBeCloseTo((1 - LEXICAL_WEIGHT) / 2, 12);
  });
});
