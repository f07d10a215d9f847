import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nearDuplicateClusters, termSimilarity } from '../../core/nightly/clusters';
import type { Tier } from '../../core/entry';
import {
  applyPatch,
  dueForExpiry,
  expirePatch,
  planRefresh,
  planSupersession,
  QueryIndex,
  queryMatches,
  refreshEligible,
  renewPatch,
  restorePatch,
  supersedePatch,
  type RefreshEntry,
  type RefreshPolicy,
  type SupersessionEntry,
} from '../../core/nightly/plans';
import { DAY_MS, HOUR_MS, salienceAt } from '../../core/salience';
import { moveBetweenTiers, moveManyBetweenTiers, type BatchTierOps, type TierOps } from '../../core/tiers';
import { isExpired } from '../../core/entry';

const ASOF = Date.UTC(2025, 5, 1);

// Moves between tiers, with a crash injected at any step -------------------------------

interface Doc {
  _id: string;
  version: number;
  body: string;
  spilledAt?: number;
}

class CrashAt extends Error {}

/** Two in-memory tiers; the invariant is checked after every operation. */
function memoryTiers(id: string, crashAtOp: number | undefined) {
  const tiers: Record<Tier, Map<string, Doc>> = { hot: new Map(), cold: new Map() };
  let ops = 0;
  const violations: string[] = [];
  const step = () => {
    if (ops++ === crashAtOp) throw new CrashAt(`crash before operation ${ops - 1}`);
  };
  const check = () => {
    if (!tiers.hot.has(id) && !tiers.cold.has(id)) violations.push(`after op ${ops}: in neither tier`);
  };
  const store: TierOps<Doc> = {
    async get(tier, key) {
      step();
      const d = tiers[tier].get(key);
      return d && { ...d };
    },
    async put(tier, doc) {
      step();
      tiers[tier].set(doc._id, { ...doc });
      check();
    },
    async removeVersion(tier, key, version) {
      step();
      const d = tiers[tier].get(key);
      if (!d || d.version !== version) return false;
      tiers[tier].delete(key);
      check();
      return true;
    },
  };
  return { tiers, store, violations };
}

const spill = (d: Doc): Doc => ({ ...d, spilledAt: 7 });
const rehydrate = (d: Doc): Doc => {
  const { spilledAt: _spilledAt, ...rest } = d;
  return { ...rest, version: d.version + 1 };
};

/** Many entries in two in-memory tiers, with batch operations; the invariant is checked after every operation. */
function memoryBatchTiers(
  ids: string[],
  crashAtOp: number | undefined,
  tiers: Record<Tier, Map<string, Doc>>,
) {
  let ops = 0;
  const violations: string[] = [];
  const step = () => {
    if (ops++ === crashAtOp) throw new CrashAt(`crash before operation ${ops - 1}`);
  };
  const check = () => {
    for (const id of ids)
      if (!tiers.hot.has(id) && !tiers.cold.has(id))
        violations.push(`after op ${ops}: ${id} in neither tier`);
  };
  const store: BatchTierOps<Doc> = {
    async get(tier, key) {
      step();
      const d = tiers[tier].get(key);
      return d && { ...d };
    },
    async put(tier, doc) {
      step();
      tiers[tier].set(doc._id, { ...doc });
      check();
    },
    async removeVersion(tier, key, version) {
      step();
      const d = tiers[tier].get(key);
      if (!d || d.version !== version) return false;
      tiers[tier].delete(key);
      check();
      return true;
    },
    async putMany(tier, docs) {
      // A batch is not atomic: a crash can land after any document of it.
      for (const doc of docs) await store.put(tier, doc);
    },
    async removeVersions(tier, keys) {
      let removed = 0;
      for (const k of keys) if (await store.removeVersion(tier, k.id, k.version)) removed++;
      return removed;
    },
  };
  return { store, violations };
}

describe('spill and rehydrate are idempotent moves (docs/invariants.md, Moves lose nothing)', () => {
  it('a batch move crashed at any step, with a source changed under it, converges on a rerun', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.nat({ max: 30 }),
        fc.option(fc.nat({ max: 5 }), { nil: undefined }),
        async (n, crashAtOp, changed) => {
          const docs: Doc[] = Array.from({ length: n }, (_, i) => ({
            _id: `e${i}`,
            version: 1,
            body: `b${i}`,
          }));
          const ids = docs.map((d) => d._id);
          const tiers: Record<Tier, Map<string, Doc>> = { hot: new Map(), cold: new Map() };
          for (const d of docs) tiers.hot.set(d._id, { ...d });
          // A concurrent annotation after the batch was read: that source is newer than the copy.
          const bumped = changed !== undefined && changed < n ? `e${changed}` : undefined;
          if (bumped) tiers.hot.set(bumped, { ...tiers.hot.get(bumped)!, version: 2, body: 'newer' });
          const crashing = memoryBatchTiers(ids, crashAtOp, tiers);
          await moveManyBetweenTiers(crashing.store, docs, 'hot', 'cold', spill).catch((err) => {
            if (!(err instanceof CrashAt)) throw err;
          });
          const clean = memoryBatchTiers(ids, undefined, tiers);
          const current = docs.map((d) => tiers.hot.get(d._id)).filter((d): d is Doc => d !== undefined);
          await moveManyBetweenTiers(clean.store, current, 'hot', 'cold', spill);
          expect([...crashing.violations, ...clean.violations]).toEqual([]);
          expect(tiers.hot.size).toBe(0);
          for (const d of docs) {
            expect(tiers.cold.get(d._id)).toEqual(
              spill(d._id === bumped ? { ...d, version: 2, body: 'newer' } : d),
            );
          }
        },
      ),
    );
  });

  it('a crash before any operation, then a rerun, loses nothing and converges', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<[Tier, Tier]>(['hot', 'cold'], ['cold', 'hot']),
        fc.nat({ max: 6 }),
        fc.nat({ max: 3 }),
        async ([from, to], crashAtOp, reruns) => {
          const doc: Doc = { _id: 'e1', version: 3, body: 'the notice period is 30 days' };
          const transform = from === 'hot' ? spill : rehydrate;
          const m = memoryTiers(doc._id, crashAtOp);
          m.tiers[from].set(doc._id, { ...doc });
          await moveBetweenTiers(m.store, doc._id, from, to, transform).catch((err) => {
            if (!(err instanceof CrashAt)) throw err;
          });
          const clean = memoryTiers(doc._id, undefined);
          clean.tiers.hot = m.tiers.hot;
          clean.tiers.cold = m.tiers.cold;
          for (let i = 0; i <= reruns; i++) await moveBetweenTiers(clean.store, doc._id, from, to, transform);
          expect([...m.violations, ...clean.violations]).toEqual([]);
          expect(clean.tiers[from].has(doc._id)).toBe(false);
          expect(clean.tiers[to].get(doc._id)).toEqual(transform(doc));
        },
      ),
    );
  });

  it('a source that changes mid-move is copied again, so the change is not lost', async () => {
    const m = memoryTiers('e1', undefined);
    m.tiers.hot.set('e1', { _id: 'e1', version: 1, body: 'old' });
    const ops: TierOps<Doc> = {
      ...m.store,
      async put(tier, doc) {
        await m.store.put(tier, doc);
        // A concurrent annotation lands between the copy and the delete, once.
        const src = m.tiers.hot.get('e1');
        if (src && src.version === 1) m.tiers.hot.set('e1', { ...src, version: 2, body: 'new' });
      },
    };
    expect(await moveBetweenTiers(ops, 'e1', 'hot', 'cold', spill)).toBe('moved');
    expect(m.tiers.hot.has('e1')).toBe(false);
    expect(m.tiers.cold.get('e1')).toMatchObject({ version: 2, body: 'new' });
  });

  it('spill then rehydrate gives the entry back (docs/invariants.md, Reversible lifecycle)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), fc.nat({ max: 100 }), async (body, version) => {
        const m = memoryTiers('e1', undefined);
        const doc: Doc = { _id: 'e1', version, body };
        m.tiers.hot.set('e1', { ...doc });
        await moveBetweenTiers(m.store, 'e1', 'hot', 'cold', spill);
        await moveBetweenTiers(m.store, 'e1', 'cold', 'hot', rehydrate);
        expect(m.tiers.cold.size).toBe(0);
        expect(m.tiers.hot.get('e1')).toEqual({ ...doc, version: version + 1 });
      }),
    );
  });
});

// Supersession and expiry are reversible annotations -----------------------------------

const factArb = fc.record({
  _id: fc.string({ minLength: 1, maxLength: 4 }),
  isActive: fc.constant(true),
  validity: fc.record({ volatile: fc.constant(true), freshUntil: fc.integer({ min: 0, max: ASOF }) }),
  text: fc.string(),
  version: fc.nat(),
});

describe('supersession and expiry are reversible (docs/invariants.md, Reversible lifecycle)', () => {
  it('restore undoes supersede, leaving only the restore time behind', () => {
    fc.assert(
      fc.property(factArb, fc.string({ minLength: 1 }), fc.integer({ min: 0 }), (e, newer, at) => {
        const superseded = applyPatch(e, supersedePatch(newer));
        expect(superseded).toMatchObject({ isActive: false, supersededBy: newer });
        const restored = applyPatch(superseded, restorePatch(at));
        expect(restored).toEqual({ ...e, restoredAt: at });
      }),
    );
  });

  it('renew undoes expiry: the fact is fresh again and no longer annotated', () => {
    fc.assert(
      fc.property(factArb, fc.integer({ min: 1, max: 30 }), (e, days) => {
        const expired = applyPatch(e, expirePatch(ASOF));
        expect(dueForExpiry(expired, ASOF + 1)).toBe(false);
        const renewed = applyPatch(expired, renewPatch(ASOF + days * DAY_MS));
        expect('expiredAt' in renewed).toBe(false);
        expect(isExpired(renewed, ASOF + 1)).toBe(false);
        expect({ ...renewed, validity: e.validity }).toEqual(e);
      }),
    );
  });

  it('expiry is due exactly for a volatile fact past freshUntil that is not annotated yet', () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.option(fc.integer({ min: 0, max: 2 * ASOF }), { nil: undefined }),
        fc.option(fc.nat(), { nil: undefined }),
        (volatile, freshUntil, expiredAt) => {
          const e = {
            validity: freshUntil === undefined ? { volatile } : { volatile, freshUntil },
            ...(expiredAt === undefined ? {} : { expiredAt }),
          };
          const due = expiredAt === undefined && volatile && freshUntil !== undefined && ASOF > freshUntil;
          expect(dueForExpiry(e, ASOF)).toBe(due);
        },
      ),
    );
  });
});

// Supersession -------------------------------------------------------------------------

const supersessionStoreArb = fc
  .array(
    fc.record({
      subject: fc.constantFrom('supplier', 'office', undefined),
      attribute: fc.constantFrom('notice period', 'address'),
      day: fc.integer({ min: 0, max: 20 }),
      restoredDay: fc.option(fc.integer({ min: 0, max: 25 }), { nil: undefined }),
    }),
    { maxLength: 25 },
  )
  .map((rows) =>
    rows.map((r, i): SupersessionEntry => {
      const e: SupersessionEntry = {
        _id: `f${String(i).padStart(2, '0')}`,
        writtenAt: r.day * DAY_MS,
        isActive: true,
      };
      if (r.subject) {
        e.subject = r.subject;
        e.attribute = r.attribute;
      }
      if (r.restoredDay !== undefined) e.restoredAt = r.restoredDay * DAY_MS;
      return e;
    }),
  );

function applySupersession(entries: SupersessionEntry[]): SupersessionEntry[] {
  const byId = new Map(entries.map((e) => [e._id, { ...e }]));
  for (const step of planSupersession(entries)) {
    const older = byId.get(step.olderId)!;
    byId.set(step.olderId, applyPatch(older, supersedePatch(step.newerId)));
  }
  return [...byId.values()];
}

describe('supersession', () => {
  it('leaves the newest fact of each subject and attribute active, and only restored ones beside it', () => {
    fc.assert(
      fc.property(supersessionStoreArb, (store) => {
        const after = applySupersession(store);
        const groups = new Map<string, SupersessionEntry[]>();
        for (const e of after) {
          if (!e.subject) continue;
          const key = `${e.subject}/${e.attribute}`;
          groups.set(key, [...(groups.get(key) ?? []), e]);
        }
        for (const group of groups.values()) {
          const ordered = [...group].sort((a, b) => a.writtenAt - b.writtenAt || (a._id < b._id ? -1 : 1));
          ordered.forEach((e, i) => {
            const later = ordered.slice(i + 1);
            if (later.length === 0) expect(e.isActive).toBe(true);
            else if (e.isActive) {
              // Active beside a newer fact only if restored after everything written since.
              expect(later.some((n) => n.writtenAt > (e.restoredAt ?? -Infinity))).toBe(false);
            } else {
              const next = after.find((n) => n._id === e.supersededBy)!;
              expect(next.writtenAt).toBeGreaterThanOrEqual(e.writtenAt);
              expect(`${next.subject}/${next.attribute}`).toBe(`${e.subject}/${e.attribute}`);
            }
          });
        }
        // Facts without a subject are never touched; a second pass has nothing to do.
        for (const e of after.filter((x) => !x.subject)) expect(e.isActive).toBe(true);
        expect(planSupersession(after)).toEqual([]);
      }),
    );
  });

  it('the chain from any superseded fact reaches the current one', () => {
    fc.assert(
      fc.property(supersessionStoreArb, (store) => {
        const after = applySupersession(store.map(({ restoredAt: _r, ...e }) => e));
        const byId = new Map(after.map((e) => [e._id, e]));
        for (const e of after) {
          let cur = e;
          for (let hops = 0; cur.supersededBy; hops++) {
            expect(hops).toBeLessThan(after.length);
            cur = byId.get(cur.supersededBy)!;
          }
          expect(cur.isActive).toBe(true);
        }
      }),
    );
  });
});

// Refresh ------------------------------------------------------------------------------

const refreshPolicyArb: fc.Arbitrary<RefreshPolicy> = fc
  .record({
    halfLifeHours: fc.integer({ min: 1, max: 200 }),
    gateThreshold: fc.double({ min: 0.01, max: 0.8, noNaN: true }),
    refreshWindowHours: fc.integer({ min: 1, max: 400 }),
    boostShare: fc.double({ min: 0.01, max: 1, noNaN: true }),
    byMeaning: fc.boolean(),
  })
  .map((p) => ({
    halfLifeMs: p.halfLifeHours * HOUR_MS,
    gateThreshold: p.gateThreshold,
    refreshWindowMs: p.refreshWindowHours * HOUR_MS,
    refreshSalience: p.gateThreshold + (1 - p.gateThreshold) * p.boostShare,
    byMeaning: p.byMeaning,
  }));

const WORDS = ['supplier', 'notice', 'period', 'day', 'invoice', 'quota', 'berlin', 'office'];

const refreshCandidatesArb = fc.array(
  fc.record({
    terms: fc.uniqueArray(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 5 }),
    tier: fc.constantFrom<Tier>('hot', 'cold'),
    dormantOffsetHours: fc.integer({ min: -500, max: 200 }),
    isActive: fc.boolean(),
    freshOffsetHours: fc.option(fc.integer({ min: -100, max: 100 }), { nil: undefined }),
    base: fc.double({ min: 0.01, max: 1, noNaN: true }),
  }),
  { maxLength: 30 },
);

describe('refresh', () => {
  it('raises exactly the eligible, matching entries above the gate, never lowering salience', () => {
    fc.assert(
      fc.property(
        refreshCandidatesArb,
        fc.array(fc.uniqueArray(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 4 }), { maxLength: 4 }),
        // Which candidates a logged recall found by meaning (by index).
        fc.uniqueArray(fc.nat({ max: 29 }), { maxLength: 10 }),
        refreshPolicyArb,
        (rows, queries, meaning, policy) => {
          const candidates = rows.map((r, i) => {
            const entry: RefreshEntry = {
              _id: `r${i}`,
              terms: r.terms,
              salience: { base: r.base, at: ASOF - 10 * DAY_MS },
              dormantAt: ASOF + r.dormantOffsetHours * HOUR_MS,
              isActive: r.isActive,
              validity:
                r.freshOffsetHours === undefined
                  ? { volatile: false }
                  : { volatile: true, freshUntil: ASOF + r.freshOffsetHours * HOUR_MS },
            };
            return { entry, tier: r.tier };
          });
          const index = new QueryIndex(queries);
          const byMeaning = new Set(meaning.map((i) => `r${i}`));
          const steps = planRefresh(candidates, index, byMeaning, ASOF, policy);
          const refreshed = new Map(steps.map((s) => [s.id, s]));
          for (const { entry, tier } of candidates) {
            const matches =
              queries.some((q) => queryMatches(q, new Set(entry.terms))) ||
              (policy.byMeaning && byMeaning.has(entry._id));
            const eligible = refreshEligible(entry, tier, ASOF, policy);
            expect(refreshed.has(entry._id)).toBe(matches && eligible);
            if (tier === 'hot' && entry.dormantAt > ASOF) expect(refreshed.has(entry._id)).toBe(false);
            const step = refreshed.get(entry._id);
            if (!step) continue;
            expect(step.dormantAt).toBeGreaterThan(ASOF);
            expect(step.salience.base).toBeGreaterThanOrEqual(
              salienceAt(entry.salience, ASOF, policy.halfLifeMs) - 1e-12,
            );
          }
        },
      ),
    );
  });

  it('a hot entry is refreshable only while gated and inside its refresh window', () => {
    const policy: RefreshPolicy = {
      halfLifeMs: 72 * HOUR_MS,
      gateThreshold: 0.15,
      refreshWindowMs: 168 * HOUR_MS,
      refreshSalience: 0.5,
      byMeaning: true,
    };
    const entry = (dormantAt: number): RefreshEntry => ({
      _id: 'x',
      terms: ['notice'],
      salience: { base: 0.5, at: 0 },
      dormantAt,
      isActive: true,
      validity: { volatile: false },
    });
    expect(refreshEligible(entry(ASOF + 1), 'hot', ASOF, policy)).toBe(false);
    expect(refreshEligible(entry(ASOF), 'hot', ASOF, policy)).toBe(true);
    expect(refreshEligible(entry(ASOF - policy.refreshWindowMs), 'hot', ASOF, policy)).toBe(true);
    expect(refreshEligible(entry(ASOF - policy.refreshWindowMs - 1), 'hot', ASOF, policy)).toBe(false);
    expect(refreshEligible(entry(ASOF - 100 * DAY_MS), 'cold', ASOF, policy)).toBe(true);
  });

  it('a query matches an entry holding at least half of its terms', () => {
    expect(queryMatches(['supplier', 'notice', 'period'], new Set(['notice', 'period']))).toBe(true);
    expect(queryMatches(['supplier', 'notice', 'period'], new Set(['period']))).toBe(false);
    expect(queryMatches([], new Set(['period']))).toBe(false);
  });
});

// Clustering ---------------------------------------------------------------------------

describe('near-duplicate clusters', () => {
  it('are disjoint, bounded by K + 1, similar to their seed, and deterministic', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uniqueArray(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 6 }), {
          maxLength: 40,
        }),
        fc.double({ min: 0.2, max: 0.95, noNaN: true }),
        fc.integer({ min: 1, max: 6 }),
        (termLists, similarity, neighbours) => {
          const items = termLists.map((terms, i) => ({ id: `c${i}`, writtenAt: i % 7, terms }));
          const opts = { similarity, neighbours };
          const clusters = nearDuplicateClusters(items, opts);
          const seen = new Set<string>();
          const byId = new Map(items.map((i) => [i.id, new Set(i.terms)]));
          for (const cluster of clusters) {
            expect(cluster.length).toBeGreaterThanOrEqual(2);
            expect(cluster.length).toBeLessThanOrEqual(neighbours + 1);
            for (const id of cluster) {
              expect(seen.has(id)).toBe(false);
              seen.add(id);
            }
            const seed = cluster
              .map((id) => items.find((i) => i.id === id)!)
              .sort((a, b) => a.writtenAt - b.writtenAt || (a.id < b.id ? -1 : 1))[0]!;
            for (const id of cluster) {
              if (id !== seed.id)
                expect(termSimilarity(byId.get(seed.id)!, byId.get(id)!)).toBeGreaterThanOrEqual(similarity);
            }
          }
          expect(nearDuplicateClusters([...items].reverse(), opts)).toEqual(clusters);
        },
      ),
    );
  });

  it('by meaning as well: each member is similar to its seed by terms or by meaning, and without meaning nothing changes', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uniqueArray(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 6 }), {
          minLength: 2,
          maxLength: 30,
        }),
        fc.array(fc.tuple(fc.nat(29), fc.nat(29), fc.double({ min: 0.5, max: 1, noNaN: true })), {
          maxLength: 60,
        }),
        fc.double({ min: 0.2, max: 0.95, noNaN: true }),
        fc.double({ min: 0.6, max: 0.99, noNaN: true }),
        fc.integer({ min: 1, max: 6 }),
        (termLists, pairs, similarity, meaningSimilarity, neighbours) => {
          const items = termLists.map((terms, i) => ({ id: `c${i}`, writtenAt: i % 5, terms }));
          // A vector index's answer: per id, neighbours with their similarity.
          const meaning = new Map<string, { id: string; similarity: number }[]>();
          const sim = new Map<string, number>();
          for (const [a, b, value] of pairs) {
            if (a >= items.length || b >= items.length || a === b) continue;
            const key = [a, b].sort().join(' ');
            if (sim.has(key)) continue;
            sim.set(key, value);
            meaning.set(`c${a}`, [...(meaning.get(`c${a}`) ?? []), { id: `c${b}`, similarity: value }]);
          }
          const lexical = nearDuplicateClusters(items, { similarity, neighbours });
          // Without a threshold for meaning, the neighbours by meaning are ignored.
          expect(nearDuplicateClusters(items, { similarity, neighbours }, meaning)).toEqual(lexical);
          const opts = { similarity, neighbours, meaningSimilarity };
          const clusters = nearDuplicateClusters(items, opts, meaning);
          const byId = new Map(items.map((i) => [i.id, i]));
          const seen = new Set<string>();
          for (const cluster of clusters) {
            expect(cluster.length).toBeLessThanOrEqual(neighbours + 1);
            for (const id of cluster) {
              expect(seen.has(id)).toBe(false);
              seen.add(id);
            }
            const seed = cluster
              .map((id) => byId.get(id)!)
              .sort((a, b) => a.writtenAt - b.writtenAt || (a.id < b.id ? -1 : 1))[0]!;
            for (const id of cluster.filter((c) => c !== seed.id)) {
              const byTerms = termSimilarity(new Set(seed.terms), new Set(byId.get(id)!.terms)) >= similarity;
              const key = [Number(seed.id.slice(1)), Number(id.slice(1))].sort().join(' ');
              const byMeaning = (sim.get(key) ?? 0) >= meaningSimilarity;
              expect(byTerms || byMeaning).toBe(true);
            }
          }
          expect(nearDuplicateClusters([...items].reverse(), opts, meaning)).toEqual(clusters);
        },
      ),
    );
  });

  it('merges two rewordings of one fact that share no term when their meaning is near enough', () => {
    const items = [
      { id: 'a', writtenAt: 1, terms: ['favourit', 'colour', 'teal'] },
      { id: 'b', writtenAt: 2, terms: ['hue', 'prefer', 'turquois'] },
    ];
    const meaning = new Map([['b', [{ id: 'a', similarity: 0.97 }]]]);
    expect(nearDuplicateClusters(items, { similarity: 0.6, neighbours: 4 }, meaning)).toEqual([]);
    expect(
      nearDuplicateClusters(items, { similarity: 0.6, neighbours: 4, meaningSimilarity: 0.96 }, meaning),
    ).toEqual([['a', 'b']]);
    expect(
      nearDuplicateClusters(items, { similarity: 0.6, neighbours: 4, meaningSimilarity: 0.98 }, meaning),
    ).toEqual([]);
  });
});
