import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HOUR_MS } from '../../core/salience';
import type { ReclaimEntry, ReclaimPolicy } from '../../core/nightly/reclaim';
import {
  chronological,
  placeboFor,
  planReclaimToBudget,
  rankHybridTopK,
  rankTopK,
  readContext,
  retainByImportance,
  retainFifo,
  retainGoldControl,
  retainRandom,
  retainRedundancyAware,
  TOP_K,
  totalTokens,
  withRestored,
  type MemoryUnit,
  type SemanticView,
} from '../../audit/arms';

function unit(i: number, text: string, tokens = Math.ceil(text.length / 4)): MemoryUnit {
  return {
    id: `u${i}`,
    sessionId: `s${Math.floor(i / 4)}`,
    turn: i % 4,
    role: 'user',
    at: 1000 + i,
    tokens,
    text,
  };
}

const WORDS = ['coffee', 'bike', 'paris', 'notice', 'period', 'shoe', 'rack', 'garden', 'piano', 'tax'];
const unitsArb = fc
  .array(
    fc.tuple(
      fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 6 }),
      fc.integer({ min: 1, max: 50 }),
    ),
    {
      minLength: 1,
      maxLength: 40,
    },
  )
  .map((rows) => rows.map(([words, tokens], i) => unit(i, words.join(' '), tokens)));

const retainers: [string, (u: MemoryUnit[], budget: number) => Set<string>][] = [
  ['fifo', retainFifo],
  ['random', (u, b) => retainRandom(u, b, 'seed')],
  ['redundancy', retainRedundancyAware],
  ['importance', (u, b) => retainByImportance(u, new Map(u.map((x, i) => [x.id, (i * 7) % 10])), b)],
  ['gold-control', (u, b) => retainGoldControl(u, new Set([u[0]!.id]), b, 'seed')],
];

describe('eviction arms', () => {
  it.each(retainers)('%s keeps within the budget and evicts nothing it need not', (_name, retain) => {
    fc.assert(
      fc.property(unitsArb, fc.integer({ min: 0, max: 800 }), (units, budget) => {
        const kept = retain(units, budget);
        const keptUnits = units.filter((u) => kept.has(u.id));
        if (totalTokens(units) <= budget) expect(kept.size).toBe(units.length);
        else {
          expect(totalTokens(keptUnits)).toBeLessThanOrEqual(budget);
          expect(kept.size).toBeLessThan(units.length);
        }
        expect(retain(units, budget)).toEqual(kept);
      }),
    );
  });

  it('FIFO keeps a newest suffix', () => {
    fc.assert(
      fc.property(unitsArb, fc.integer({ min: 0, max: 800 }), (units, budget) => {
        const kept = retainFifo(units, budget);
        const flags = chronological(units).map((u) => kept.has(u.id));
        expect(flags.indexOf(true) === -1 || flags.slice(flags.indexOf(true)).every(Boolean)).toBe(true);
      }),
    );
  });

  it('random nests budgets under one seed and differs across seeds', () => {
    const units = Array.from({ length: 60 }, (_, i) => unit(i, `${WORDS[i % 10]} ${i}`, 10));
    const big = retainRandom(units, 300, 'a');
    const small = retainRandom(units, 100, 'a');
    for (const id of small) expect(big.has(id)).toBe(true);
    expect(retainRandom(units, 300, 'b')).not.toEqual(big);
  });

  it('redundancy-aware evicts a near-duplicate before unique content', () => {
    const units = [
      unit(0, 'my bike is a red road bike from paris'),
      unit(1, 'my bike is a red road bike from paris too'),
      unit(2, 'the piano tax notice period is thirty days'),
    ];
    const kept = retainRedundancyAware(units, totalTokens(units) - 1);
    expect(kept.has('u2')).toBe(true);
    expect(kept.size).toBe(2);
    // Ties go to the older unit.
    expect(kept.has('u0')).toBe(false);
  });

  it('importance evicts the lowest scores first', () => {
    const units = [unit(0, 'aaaa'), unit(1, 'bbbb'), unit(2, 'cccc')];
    const kept = retainByImportance(
      units,
      new Map([
        ['u0', 9],
        ['u1', 2],
        ['u2', 5],
      ]),
      2,
    );
    expect([...kept].sort()).toEqual(['u0', 'u2']);
  });

  it('the control evicts gold far more often than random does', () => {
    let controlGoldLost = 0;
    let randomGoldLost = 0;
    for (let q = 0; q < 200; q++) {
      const units = Array.from({ length: 30 }, (_, i) => unit(i, `${WORDS[i % 10]} ${q}`, 10));
      const gold = new Set(['u7']);
      // Budget keeps 80%: the baseline evicts 20% of everything, the control 60% of gold.
      if (!retainGoldControl(units, gold, 240, `q${q}`).has('u7')) controlGoldLost++;
      if (!retainRandom(units, 240, `q${q}`).has('u7')) randomGoldLost++;
    }
    expect(controlGoldLost).toBeGreaterThan(2 * randomGoldLost);
    expect(controlGoldLost).toBeGreaterThan(90);
    expect(controlGoldLost).toBeLessThan(150);
  });
});

describe('read conditions', () => {
  const query = 'where do I keep my shoe rack';
  const haystack = Array.from({ length: 100 }, (_, i) => unit(i, `${WORDS[i % 10]} day ${i}`, 5));

  it('top-60 returns the best lexical matches, ties broken by recency', () => {
    const ranked = rankTopK(query, haystack, TOP_K);
    expect(ranked).toHaveLength(TOP_K);
    // "shoe" (i%10==5) and "rack" (6) units come first, newest first within each.
    expect(ranked[0]!.text).toMatch(/shoe|rack/);
    const zeros = ranked.filter((u) => !/shoe|rack/.test(u.text));
    expect(zeros.map((u) => u.at)).toEqual([...zeros.map((u) => u.at)].sort((a, b) => b - a));
  });

  it('top-60 over a store of at most 60 units hands the reader all of it', () => {
    const small = haystack.slice(0, 40);
    expect(readContext('top-60', query, small, new Set()).map((u) => u.id)).toEqual(
      chronological(small).map((u) => u.id),
    );
  });

  it('forced-gold puts every surviving gold unit in the context, within 60 units', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 0, max: 99 }), { maxLength: 10 }), (goldIdx) => {
        const gold = new Set(goldIdx.map((i) => `u${i}`));
        const ctx = readContext('forced-gold', 'unrelated words entirely', haystack, gold);
        expect(ctx.length).toBe(TOP_K);
        for (const id of gold) expect(ctx.some((u) => u.id === id)).toBe(true);
      }),
    );
  });

  it('restore appends missing gold within the cap and the placebo matches its length', () => {
    const context = haystack.slice(0, 3);
    const gold = [unit(200, 'q'.repeat(40)), unit(201, 'y'.repeat(400)), context[1]!];
    const { units, added } = withRestored(context, gold, 50);
    expect(added.map((u) => u.id)).toEqual(['u200', 'u201']);
    expect(added[1]!.truncated).toBe(true);
    expect(added.reduce((s, u) => s + u.tokens, 0)).toBe(50);
    expect(units).toHaveLength(5);
    const placebo = placeboFor(added, haystack.slice(50, 60));
    expect(placebo.map((u) => u.text.length)).toEqual(added.map((u) => u.text.length));
    expect(placebo.every((p) => !p.text.includes('q') && p.id.startsWith('placebo:'))).toBe(true);
  });
});

describe("memgate's arm: reclaim to a token budget", () => {
  const policy: ReclaimPolicy = {
    hotCapacity: 1,
    highWatermark: 1,
    lowWatermark: 1,
    reclaimFloor: 0.05,
    gateThreshold: 0.15,
    refreshWindowMs: 168 * HOUR_MS,
    evictLossySubsumed: false,
  };
  const asOf = 1_000 * HOUR_MS;
  const entriesArb = fc
    .array(
      fc.record({
        tokens: fc.integer({ min: 1, max: 300 }),
        writtenAt: fc.integer({ min: 0, max: 900 }),
        dormantIn: fc.integer({ min: -800, max: 50 }),
        subsumed: fc.constantFrom('none', 'lossless', 'lossy'),
      }),
      { maxLength: 40 },
    )
    .map((rows) =>
      rows.map((r, i): ReclaimEntry => ({
        _id: `e${i}`,
        kind: 'episode',
        tokens: r.tokens,
        writtenAt: r.writtenAt * HOUR_MS,
        validity: { volatile: false },
        isActive: true,
        dormantAt: asOf + r.dormantIn * HOUR_MS,
        ...(r.subsumed === 'none'
          ? {}
          : { subsumedBy: [{ summaryId: `s${i}`, lossless: r.subsumed === 'lossless' }] }),
      })),
    );

  it('frees tokens oldest write first until the budget fits, and deletes only what the two-key check proves dead', () => {
    fc.assert(
      fc.property(entriesArb, fc.integer({ min: 0, max: 5000 }), (hot, budget) => {
        const plan = planReclaimToBudget(hot, budget, asOf, policy);
        const moved = new Set(plan.map((p) => p.id));
        const left = hot.filter((e) => !moved.has(e._id));
        expect(left.reduce((s, e) => s + e.tokens, 0)).toBeLessThanOrEqual(Math.max(budget, 0));
        const oldestLeft = Math.min(...left.map((e) => e.writtenAt));
        for (const e of hot.filter((x) => moved.has(x._id)))
          expect(e.writtenAt).toBeLessThanOrEqual(oldestLeft);
        for (const p of plan) {
          const e = hot.find((x) => x._id === p.id)!;
          const dead =
            e.dormantAt <= asOf &&
            asOf > e.dormantAt + policy.refreshWindowMs &&
            (e.subsumedBy ?? []).some((s) => s.lossless);
          expect(p.action).toBe(dead ? 'evict' : 'spill');
        }
      }),
    );
  });
});

describe('the hybrid ranker (--ranker hybrid)', () => {
  /** A unit vector at `angle` from the query's, in two dimensions: cosine = cos(angle). */
  const at = (angle: number) => Float32Array.from([Math.cos(angle), Math.sin(angle)]);
  // Reference passages far from the query (cosines around 0), spread a little as real ones are.
  const reference = Array.from({ length: 48 }, (_, i) => at(Math.PI / 2 + ((i % 12) - 6) * 0.02));
  const view = (vectors: [string, number][]): SemanticView => ({
    query: at(0),
    vectors: new Map(vectors.map(([id, angle]) => [id, at(angle)])),
    reference,
  });

  it('puts a unit that shares no word with the question but means it into the top k', () => {
    const units = [
      unit(0, 'my favourite colour is teal'),
      unit(1, 'which hue do I prefer'),
      ...Array.from({ length: 6 }, (_, i) => unit(2 + i, `the hue of the wall in room ${i}`)),
    ];
    const question = 'which hue do I prefer';
    const semantic = view([
      ['u0', 0.1],
      ['u1', 0.3],
    ]);
    expect(rankTopK(question, units, 2).map((u) => u.id)).not.toContain('u0');
    expect(rankHybridTopK(question, units, 2, semantic).map((u) => u.id)).toContain('u0');
  });

  it('ranks as the frozen BM25 ranker when no unit is similar enough (fast-check)', () => {
    fc.assert(
      fc.property(unitsArb, fc.integer({ min: 1, max: 50 }), (units, k) => {
        // Every vector at right angles to the question, amid the reference passages: none
        // stands out of the background, so nothing is found by meaning.
        const semantic = view(units.map((u) => [u.id, Math.PI / 2]));
        expect(rankHybridTopK('coffee notice period', units, k, semantic)).toEqual(
          rankTopK('coffee notice period', units, k),
        );
      }),
    );
  });

  it('hands the reader k distinct units of those searched (fast-check)', () => {
    fc.assert(
      fc.property(
        unitsArb,
        fc.integer({ min: 1, max: 50 }),
        fc.double({ min: 0, max: 1.5 }),
        (units, k, spread) => {
          const semantic = view(units.map((u, i) => [u.id, (spread * i) / units.length]));
          const top = rankHybridTopK('bike garden tax', units, k, semantic);
          expect(new Set(top.map((u) => u.id)).size).toBe(Math.min(k, units.length));
          for (const u of top) expect(units).toContain(u);
        },
      ),
    );
  });
});
