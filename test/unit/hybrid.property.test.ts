import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy, type MemoryPolicy } from '../../core/entry';
import {
  backgroundOf,
  foundByMeaning,
  FOUND_AT_SPREADS,
  FULL_AT_SPREADS,
  fuseScores,
  LEXICAL_WEIGHT,
  nearestFoundByMeaning,
  placeNearest,
  semanticShare,
  standing,
  type Background,
} from '../../core/hybrid';
import { couldEnterTopK, expectedTopK, rankHybrid, scoreLexical, type Candidate } from '../../core/recall';
import { HOUR_MS, salienceAt } from '../../core/salience';
import { terms } from '../../core/text';

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
/** Similarities of unrelated entries, as a model might spread them. */
const sample = fc.array(fc.double({ min: 0.6, max: 0.85, noNaN: true }), { minLength: 8, maxLength: 80 });
const ceiling = fc.double({ min: 1, max: 40, noNaN: true });

/** A background of centre 0.75 and spread 0.02: 2 spreads up is 0.79, 6 is 0.87. */
const BG: Background = { center: 0.75, spread: 0.02 };

describe('fuseScores (core/hybrid.ts)', () => {
  it('holds each id once, says how it was found, and keeps relevance in [0, 1], best first (fast-check)', () => {
    fc.assert(
      fc.property(lexicalList, semanticList, sample, ceiling, (lexical, semantic, drawn, top) => {
        const background = backgroundOf(drawn)!;
        const fused = fuseScores({ scores: lexical, ceiling: top }, { similarities: semantic, background });
        const lex = new Set(lexical.map((l) => l.id));
        const sem = new Set(
          semantic.filter((s) => foundByMeaning(s.similarity, background)).map((s) => s.id),
        );
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

  // Another model puts its cosines on another scale: the same decisions must come out.
  it('decides the same when every cosine is compressed into another range (fast-check)', () => {
    fc.assert(
      fc.property(
        lexicalList,
        semanticList,
        sample,
        ceiling,
        fc.double({ min: 0.05, max: 3, noNaN: true }),
        fc.double({ min: -0.5, max: 0.5, noNaN: true }),
        (lexical, semantic, drawn, top, scale, shift) => {
          const squeeze = (x: number) => scale * x + shift;
          const background = backgroundOf(drawn)!;
          const before = fuseScores(
            { scores: lexical, ceiling: top },
            { similarities: semantic, background },
          );
          // Rounding may tip a similarity exactly at the threshold, or a near-tie, either way.
          fc.pre(
            semantic.every((s) => Math.abs(standing(s.similarity, background) - FOUND_AT_SPREADS) > 1e-6),
          );
          fc.pre(before.every((f, i) => i === 0 || before[i - 1]!.relevance - f.relevance > 1e-9));
          const after = fuseScores(
            { scores: lexical, ceiling: top },
            {
              similarities: semantic.map((s) => ({ id: s.id, similarity: squeeze(s.similarity) })),
              background: backgroundOf(drawn.map(squeeze))!,
            },
          );
          expect(after.map((f) => [f.id, f.foundBy])).toEqual(before.map((f) => [f.id, f.foundBy]));
          after.forEach((f, i) => expect(f.relevance).toBeCloseTo(before[i]!.relevance, 6));
        },
      ),
    );
  });

  it('measures a lexical score against the ceiling, not against the best of the list (fast-check)', () => {
    fc.assert(
      fc.property(lexicalList, ceiling, (lexical, top) => {
        const sorted = [...lexical].sort((a, b) => b.score - a.score);
        const fused = fuseScores({ scores: sorted, ceiling: top });
        expect(fused.map((f) => f.id)).toEqual(sorted.map((l) => l.id));
        fused.forEach((f, i) =>
          expect(f.relevance).toBeCloseTo(LEXICAL_WEIGHT * Math.min(1, sorted[i]!.score / top), 12),
        );
      }),
    );
  });

  it('drops a neighbour that does not stand out of the background, and a match in both lists outranks either alone', () => {
    const fused = fuseScores(
      {
        scores: [
          { id: 'answer', score: 9 },
          { id: 'one-word', score: 3 },
        ],
        ceiling: 9,
      },
      {
        similarities: [
          { id: 'answer', similarity: 0.9 },
          { id: 'paraphrase', similarity: 0.83 },
          { id: 'unrelated', similarity: 0.77 },
        ],
        background: BG,
      },
    );
    expect(fused.map((f) => [f.id, f.foundBy])).toEqual([
      ['answer', 'both'],
      ['paraphrase', 'semantic'],
      ['one-word', 'lexical'],
    ]);
    expect(fused[0]!.relevance).toBeCloseTo(1, 12);
    expect(fused[1]!.relevance).toBeCloseTo(
      (1 - LEXICAL_WEIGHT) * ((4 - FOUND_AT_SPREADS) / (FULL_AT_SPREADS - FOUND_AT_SPREADS)),
      12,
    );
    expect(fused[2]!.relevance).toBeCloseTo(LEXICAL_WEIGHT / 3, 12);
  });
});

describe('backgroundOf (core/hybrid.ts)', () => {
  it('is not moved by the few related entries a sample holds', () => {
    const unrelated = Array.from({ length: 61 }, (_, i) => 0.7 + (i % 7) * 0.01);
    const base = backgroundOf(unrelated)!;
    const withMatches = backgroundOf([...unrelated, 0.95, 0.96, 0.97])!;
    expect(withMatches.center).toBeCloseTo(base.center, 2);
    expect(withMatches.spread).toBeCloseTo(base.spread, 2);
  });

  it('has no background without a sample, and a positive spread for identical similarities', () => {
    expect(backgroundOf([])).toBeUndefined();
    expect(backgroundOf([0.8, 0.8, 0.8])!.spread).toBeGreaterThan(0);
    expect(foundByMeaning(0.8, backgroundOf([0.8, 0.8, 0.8])!)).toBe(false);
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

describe('placeNearest (core/hybrid.ts)', () => {
  it('moves the nearest up to the k-th place when it ranks below, and changes nothing else (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 99 }), { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 12 }),
        fc.nat(),
        (xs, k, pick) => {
          const ranked = xs.map((x) => ({ id: `e${x}` }));
          const nearest = ranked[pick % ranked.length]!.id;
          const placed = placeNearest(ranked, k, nearest);
          expect(placed.map((r) => r.id).sort()).toEqual(ranked.map((r) => r.id).sort());
          const at = ranked.findIndex((r) => r.id === nearest);
          if (k === 1 || at < k) {
            expect(placed).toEqual(ranked);
          } else {
            expect(placed.findIndex((r) => r.id === nearest)).toBe(k - 1);
            expect(placed.filter((r) => r.id !== nearest)).toEqual(ranked.filter((r) => r.id !== nearest));
          }
          expect(placeNearest(ranked, k, undefined)).toEqual(ranked);
        },
      ),
    );
  });

  it('the nearest is the most similar of those found by meaning, none when none stands out', () => {
    const at = (spreads: number) => BG.center + spreads * BG.spread;
    const similarities = [
      { id: 'a', similarity: at(2) },
      { id: 'b', similarity: at(FOUND_AT_SPREADS - 0.5) },
      { id: 'c', similarity: at(3) },
      { id: 'd', similarity: at(3) },
    ];
    expect(nearestFoundByMeaning({ similarities, background: BG })).toBe('c');
    expect(nearestFoundByMeaning({ similarities: similarities.slice(1, 2), background: BG })).toBeUndefined();
  });
});

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
      background: BG,
      ...policy,
    });
    expect(hits.map((h) => [h.id, h.foundBy])).toEqual([
      ['answer', 'both'],
      ['note', 'lexical'],
    ]);
    expect(hits[0]!.similarity).toBe(0.9);
    expect(hits[1]!.similarity).toBeUndefined();
  });

  // What the issue saw: the question's best semantic match, below five fresher notes that
  // each shared one incidental word with it.
  it('keeps a strong match by meaning above fresher, more salient notes that share one word each', () => {
    const answer = candidate(
      'answer',
      'I stopped drinking coffee because it ruined my sleep.',
      0.5,
      now - 24 * HOUR_MS,
    );
    const notes = ['reason', 'give', 'up'].map((word, i) =>
      candidate(`note-${i}`, `Reminder: the ${word} item on the list.`, 1, now - HOUR_MS),
    );
    const query = terms('Why did I give up caffeine, and for what reason?');
    const hits = rankHybrid(
      scoreLexical(query, notes),
      [{ candidate: answer, similarity: BG.center + FULL_AT_SPREADS * BG.spread }],
      { now, k: 3, background: BG, ...policy },
    );
    expect(hits[0]).toMatchObject({ id: 'answer', foundBy: 'semantic' });
  });

  // The LongMemEval question: its answer was its nearest turn, but only just out of
  // the background, and every turn holding one of its words came first.
  it('keeps a place in the top k for the nearest match by meaning, below notes that share the words', () => {
    const answer = candidate(
      'answer',
      'What else can I do for the later part of the day?',
      0.5,
      now - HOUR_MS,
    );
    const notes = Array.from({ length: 6 }, (_, i) =>
      candidate(`note-${i}`, `Please suggest activities for the evening, list ${i}.`, 1, now - HOUR_MS),
    );
    const query = terms('Can you suggest some activities that I can do in the evening?');
    const opts = { now, background: BG, ...policy };
    const semantic = [
      { candidate: answer, similarity: BG.center + 2 * BG.spread },
      ...notes.map((candidate) => ({ candidate, similarity: BG.center + 1.6 * BG.spread })),
    ];
    const rank = (k: number) =>
      rankHybrid(scoreLexical(query, notes), semantic, { ...opts, k }).map((h) => h.id);
    expect(rank(10).indexOf('answer')).toBe(6);
    expect(rank(4)).toEqual([...rank(10).slice(0, 3), 'answer']);
    expect(rank(1)).toEqual(rank(10).slice(0, 1));
  });
});

/** A query no candidate shares a word with. */
const NO_WORDS = Object.assign([], { ceiling: 1 });

describe("hybrid recall's stopping rule", () => {
  it('bounds what a neighbour that shares no word could score: no read it skips would have entered the top k (fast-check)', () => {
    const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
    const now = 1_000 * HOUR_MS;
    const entry = (i: number, salience: number, age: number) =>
      hotEpisode(`e${i}`, `note ${i}`, salience, now - age * HOUR_MS, policy);
    const neighbour = fc.record({
      salience: fc.double({ min: 0.01, max: 1, noNaN: true }),
      age: fc.integer({ min: 0, max: 200 }),
      similarity: fc.double({ min: BG.center + FOUND_AT_SPREADS * BG.spread, max: 1, noNaN: true }),
    });
    fc.assert(
      fc.property(
        fc.array(neighbour, { minLength: 2, maxLength: 30 }),
        fc.integer({ min: 1, max: 10 }),
        (rows, k) => {
          const all = rows
            .map((r, i) => ({ candidate: entry(i, r.salience, r.age), similarity: r.similarity }))
            .sort((a, b) => b.similarity - a.similarity);
          const opts = { now, k, background: BG, ...policy };
          const full = rankHybrid(NO_WORDS, all, opts);
          // Read as recall reads: the nearest first (it keeps a place), then the best bound
          // first, stopping where the rule says; the answer must be the same.
          const bound = (n: (typeof all)[number]) =>
            semanticShare(n.similarity, BG) * salienceAt(n.candidate.entry.salience, now, policy.halfLifeMs);
          const [nearest, ...rest] = all;
          const read = [nearest!];
          for (const n of rest.sort((a, b) => bound(b) - bound(a))) {
            if (!couldEnterTopK(rankHybrid(NO_WORDS, read, opts), k, bound(n))) break;
            read.push(n);
          }
          expect(rankHybrid(NO_WORDS, read, opts).map((h) => h.id)).toEqual(full.map((h) => h.id));
        },
      ),
    );
  });

  it('expects, before a read, the top k the reads give when each neighbour scores its bound (fast-check)', () => {
    const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
    const now = 1_000 * HOUR_MS;
    const neighbour = fc.record({
      salience: fc.double({ min: 0.01, max: 1, noNaN: true }),
      age: fc.integer({ min: 0, max: 200 }),
      similarity: fc.double({ min: BG.center + FOUND_AT_SPREADS * BG.spread, max: 1, noNaN: true }),
    });
    fc.assert(
      fc.property(
        fc.array(neighbour, { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 10 }),
        (rows, k) => {
          const all = rows.map((r, i) => ({
            candidate: hotEpisode(`e${i}`, `note ${i}`, r.salience, now - r.age * HOUR_MS, policy),
            similarity: r.similarity,
          }));
          const opts = { now, k, background: BG, ...policy };
          const unread = all.map((n) => ({
            id: n.candidate.entry._id,
            bound:
              semanticShare(n.similarity, BG) *
              salienceAt(n.candidate.entry.salience, now, policy.halfLifeMs),
          }));
          const nearest = all.reduce((a, b) => (b.similarity > a.similarity ? b : a)).candidate.entry._id;
          const expected = expectedTopK([], unread, k, nearest);
          const found = rankHybrid(NO_WORDS, all, opts);
          // The same hits, but for ties at the k-th place: the same scores, each the hit's bound.
          const bound = new Map(unread.map((u) => [u.id, u.bound]));
          const scores = (hits: { id: string }[]) => hits.map((h) => bound.get(h.id)!).sort((a, b) => b - a);
          expect(scores(expected)).toEqual(scores(found));
          for (const h of found) expect(h.score).toBeCloseTo(bound.get(h.id)!, 12);
          expect(expected.every((h) => h.foundBy === 'semantic')).toBe(true);
        },
      ),
    );
  });

  it('gives a similarity FULL_AT_SPREADS above the background the whole semantic share, and one FOUND_AT_SPREADS above none', () => {
    const at = (spreads: number) => BG.center + spreads * BG.spread;
    expect(semanticShare(at(FULL_AT_SPREADS), BG)).toBeCloseTo(1 - LEXICAL_WEIGHT, 12);
    expect(semanticShare(at(FULL_AT_SPREADS + 3), BG)).toBeCloseTo(1 - LEXICAL_WEIGHT, 12);
    expect(semanticShare(at(FOUND_AT_SPREADS), BG)).toBeCloseTo(0, 12);
    const middle = (FOUND_AT_SPREADS + FULL_AT_SPREADS) / 2;
    expect(semanticShare(at(middle), BG)).toBeCloseTo((1 - LEXICAL_WEIGHT) / 2, 12);
  });
});
