import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EvictionBoundaryError } from '../../core/errors';
import { decideEviction, reclaimAction, type EvictionInput } from '../../core/eviction';
import {
  oldestWriteFirst,
  planReclaim,
  planReclaimOf,
  reclaimTarget,
  standsIn,
  storageView,
  type ReclaimEntry,
  type ReclaimPolicy,
  type ReclaimRanking,
  type StorageView,
} from '../../core/nightly/reclaim';
import { DAY_MS, dayOf, HOUR_MS } from '../../core/salience';

/** The two-key check as a table, written independently of core/eviction.ts. */
function designTable(i: EvictionInput): 'evict' | 'spill' | 'keep' | 'boundary' {
  if (i.reclaimFloor >= i.gateThreshold) return 'boundary';
  if (!i.gated) return i.livePolicy ? 'spill' : 'keep';
  if (i.reachable && !i.refreshWindowElapsed) return 'spill';
  if (i.reachable) return i.subsumedLosslessly ? 'evict' : 'boundary';
  return i.refreshWindowElapsed ? 'evict' : 'spill';
}

function decided(i: EvictionInput): ReturnType<typeof designTable> {
  try {
    return decideEviction(i).action;
  } catch (err) {
    if (err instanceof EvictionBoundaryError) return 'boundary';
    throw err;
  }
}

const evictionInput = fc.record({
  reclaimFloor: fc.double({ min: 0.001, max: 0.999, noNaN: true }),
  gateThreshold: fc.double({ min: 0.001, max: 0.999, noNaN: true }),
  gated: fc.boolean(),
  reachable: fc.boolean(),
  refreshWindowElapsed: fc.boolean(),
  subsumedLosslessly: fc.boolean(),
  lossySummaryFlagged: fc.boolean(),
  livePolicy: fc.constantFrom(undefined, 'capacity' as const, 'ttl' as const),
});

describe('decideEviction matches the decision table of the two-key check', () => {
  it('on every combination of inputs', () => {
    fc.assert(
      fc.property(evictionInput, (i) => {
        expect(decided(i)).toBe(designTable(i));
      }),
    );
  });

  it('reclaim deletes only a dead evict, and spills every boundary and live entry', () => {
    fc.assert(
      fc.property(evictionInput, fc.boolean(), (i, evictLossySubsumed) => {
        const table = designTable(i);
        if (i.reclaimFloor >= i.gateThreshold) return;
        const { action } = reclaimAction(i, { evictLossySubsumed });
        const dead =
          i.gated &&
          i.refreshWindowElapsed &&
          (i.subsumedLosslessly || (evictLossySubsumed && i.lossySummaryFlagged));
        expect(action).toBe((table === 'evict' || table === 'boundary') && dead ? 'evict' : 'spill');
      }),
    );
  });
});

// Random stores, clocks and configurations -------------------------------------------

const ASOF = Date.UTC(2025, 5, 1);

const policyArb: fc.Arbitrary<ReclaimPolicy> = fc
  .record({
    hotCapacity: fc.integer({ min: 1, max: 40 }),
    high: fc.double({ min: 0.5, max: 1.5, noNaN: true }),
    lowShare: fc.double({ min: 0.1, max: 1, noNaN: true }),
    gateThreshold: fc.double({ min: 0.02, max: 0.9, noNaN: true }),
    floorShare: fc.double({ min: 0, max: 0.99, noNaN: true }),
    refreshWindowMs: fc.integer({ min: 1, max: 400 }).map((h) => h * HOUR_MS),
    evictLossySubsumed: fc.boolean(),
  })
  .map((p) => ({
    hotCapacity: p.hotCapacity,
    highWatermark: p.high,
    lowWatermark: p.high * p.lowShare,
    gateThreshold: p.gateThreshold,
    reclaimFloor: p.gateThreshold * p.floorShare,
    refreshWindowMs: p.refreshWindowMs,
    evictLossySubsumed: p.evictLossySubsumed,
  }));

type StoredEntry = ReclaimEntry & { salience: { base: number; at: number } };

const subsumerArb = fc.record({ summaryId: fc.constantFrom('s1', 's2', 's3'), lossless: fc.boolean() });

function storeArb(): fc.Arbitrary<StoredEntry[]> {
  return fc
    .array(
      fc.record({
        kind: fc.constantFrom('episode' as const, 'fact' as const, 'constraint' as const, 'summary' as const),
        tokens: fc.integer({ min: 1, max: 400 }),
        ageHours: fc.integer({ min: 0, max: 60 * 24 }),
        refreshedHoursAgo: fc.option(fc.integer({ min: 0, max: 30 * 24 }), { nil: undefined }),
        dormantOffsetHours: fc.integer({ min: -40 * 24, max: 20 * 24 }),
        base: fc.double({ min: 0.01, max: 1, noNaN: true }),
        volatile: fc.boolean(),
        isActive: fc.boolean(),
        expired: fc.boolean(),
        subsumedBy: fc.option(fc.array(subsumerArb, { maxLength: 2 }), { nil: undefined }),
      }),
      { maxLength: 60 },
    )
    .map((rows) =>
      rows.map((r, i): StoredEntry => {
        const writtenAt = ASOF - r.ageHours * HOUR_MS;
        const e: StoredEntry = {
          _id: `e${String(i).padStart(3, '0')}`,
          kind: r.kind,
          tokens: r.tokens,
          writtenAt,
          validity: r.volatile ? { volatile: true, freshUntil: writtenAt + DAY_MS } : { volatile: false },
          isActive: r.isActive,
          dormantAt: ASOF + r.dormantOffsetHours * HOUR_MS,
          salience: { base: r.base, at: writtenAt },
        };
        if (r.refreshedHoursAgo !== undefined)
          e.refreshedAt = Math.max(writtenAt, ASOF - r.refreshedHoursAgo * HOUR_MS);
        if (r.expired) e.expiredAt = ASOF;
        if (r.subsumedBy) e.subsumedBy = r.subsumedBy;
        return e;
      }),
    );
}

/** The same store with every salience-derived value redrawn. */
function withOtherSalience(store: StoredEntry[], seed: number): StoredEntry[] {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
  return store.map((e) => ({
    ...e,
    salience: { base: 0.01 + next() * 0.99, at: e.writtenAt },
    dormantAt: ASOF + (next() - 0.7) * 60 * DAY_MS,
  }));
}

const validPolicy = (p: ReclaimPolicy) => p.reclaimFloor < p.gateThreshold;

describe('reclaim on random stores, clocks and configurations', () => {
  it('which entries leave hot does not depend on salience (docs/invariants.md, Gating is not lifecycle)', () => {
    fc.assert(
      fc.property(
        storeArb(),
        policyArb,
        fc.integer(),
        fc.integer({ min: -30, max: 30 }),
        (store, policy, seed, dayShift) => {
          fc.pre(validPolicy(policy));
          const asOf = ASOF + dayShift * DAY_MS;
          const chosen = planReclaim(store, asOf, policy).map((s) => s.id);
          const redrawn = planReclaim(withOtherSalience(store, seed), asOf, policy).map((s) => s.id);
          expect(redrawn).toEqual(chosen);
          expect(chosen.length).toBe(reclaimTarget(store.length, policy));
        },
      ),
    );
  });

  it('planned from the oldest write days that hold what must leave, the plan is the one from every hot entry', () => {
    fc.assert(
      fc.property(storeArb(), policyArb, (store, policy) => {
        fc.pre(validPolicy(policy));
        const need = reclaimTarget(store.length, policy);
        const day = (e: ReclaimEntry) => dayOf(Math.max(e.writtenAt, e.refreshedAt ?? e.writtenAt));
        const days = [...new Set(store.map(day))].sort((x, y) => x - y);
        const candidates: ReclaimEntry[] = [];
        for (const d of days) {
          if (candidates.length >= need) break;
          candidates.push(...store.filter((e) => day(e) === d));
        }
        expect(planReclaimOf(candidates, need, ASOF, policy)).toEqual(planReclaim(store, ASOF, policy));
      }),
    );
  });

  it('a store within its high watermark loses nothing, however many entries are gated (docs/invariants.md, Gating is not lifecycle)', () => {
    fc.assert(
      fc.property(storeArb(), policyArb, (store, policy) => {
        fc.pre(validPolicy(policy) && store.length <= policy.hotCapacity * policy.highWatermark);
        const allGated = store.map((e) => ({ ...e, dormantAt: ASOF - 90 * DAY_MS }));
        expect(planReclaim(allGated, ASOF, policy)).toEqual([]);
      }),
    );
  });

  it('reclaim stops at the low watermark', () => {
    fc.assert(
      fc.property(storeArb(), policyArb, (store, policy) => {
        fc.pre(validPolicy(policy) && store.length > policy.hotCapacity * policy.highWatermark);
        const left = store.length - planReclaim(store, ASOF, policy).length;
        expect(left).toBe(Math.min(store.length, Math.floor(policy.hotCapacity * policy.lowWatermark)));
      }),
    );
  });

  it('the ranking sees storage views only, and its order ignores salience (docs/invariants.md, Salience-blind ranking)', () => {
    fc.assert(
      fc.property(storeArb(), policyArb, fc.integer(), (store, policy, seed) => {
        fc.pre(validPolicy(policy));
        const seen: StorageView[] = [];
        const spy: ReclaimRanking = {
          name: 'spy',
          compare(a, b) {
            seen.push(a, b);
            return oldestWriteFirst.compare(a, b);
          },
        };
        const plan = planReclaim(store, ASOF, policy, spy);
        for (const view of seen) {
          expect(Object.keys(view)).not.toContain('salience');
          expect(Object.keys(view)).not.toContain('dormantAt');
        }
        const again = planReclaim(withOtherSalience(store, seed), ASOF, policy, spy);
        expect(again.map((s) => [s.id, s.rank])).toEqual(plan.map((s) => [s.id, s.rank]));
      }),
    );
  });

  it('a StorageView has no salience field at all (docs/invariants.md, Salience-blind ranking)', () => {
    const view = storageView({
      _id: 'x',
      kind: 'fact',
      tokens: 3,
      writtenAt: 1,
      validity: { volatile: false },
      isActive: true,
      dormantAt: 5,
    });
    // The projection a ranking receives cannot carry salience (docs/invariants.md, Salience-blind ranking).
    // @ts-expect-error — no salience.
    expect(view.salience).toBeUndefined();
    // @ts-expect-error — nor the gate's timestamp.
    expect(view.dormantAt).toBeUndefined();
  });

  it('an entry is evicted only when the two-key check says evict, with its stand-in named (docs/invariants.md, Two-key deletion)', () => {
    fc.assert(
      fc.property(storeArb(), policyArb, fc.integer({ min: -30, max: 30 }), (store, policy, dayShift) => {
        fc.pre(validPolicy(policy));
        const asOf = ASOF + dayShift * DAY_MS;
        for (const step of planReclaim(store, asOf, policy)) {
          const table = decided(step.inputs);
          if (step.action === 'evict') {
            const optedIn =
              policy.evictLossySubsumed &&
              step.inputs.lossySummaryFlagged &&
              step.inputs.gated &&
              step.inputs.refreshWindowElapsed;
            expect(table === 'evict' || (table === 'boundary' && optedIn)).toBe(true);
            expect(step.standIn).toBeDefined();
            expect(step.standIn!.lossy).toBe(!step.inputs.subsumedLosslessly);
          } else {
            expect(step.standIn).toBeUndefined();
          }
          if (table === 'boundary' && !policy.evictLossySubsumed) expect(step.action).toBe('spill');
          if (!step.inputs.gated) expect(step.action).toBe('spill');
        }
      }),
    );
  });

  it('a floor at or above the gate plans nothing and throws EvictionBoundaryError (docs/invariants.md, Eviction boundary)', () => {
    fc.assert(
      fc.property(storeArb(), policyArb, fc.double({ min: 1, max: 3, noNaN: true }), (store, policy, f) => {
        const bad = { ...policy, reclaimFloor: Math.min(0.999, policy.gateThreshold * f) };
        fc.pre(bad.reclaimFloor >= bad.gateThreshold);
        expect(() => planReclaim(store, ASOF, bad)).toThrow(EvictionBoundaryError);
      }),
    );
  });

  it('the default ranking takes the oldest write first; a refresh counts as a write', () => {
    const base = {
      kind: 'fact' as const,
      tokens: 1,
      validity: { volatile: false },
      isActive: true,
      dormantAt: 0,
    };
    const store: ReclaimEntry[] = [
      { ...base, _id: 'new', writtenAt: 30 },
      { ...base, _id: 'old-refreshed', writtenAt: 10, refreshedAt: 40 },
      { ...base, _id: 'old', writtenAt: 20 },
    ];
    const policy: ReclaimPolicy = {
      hotCapacity: 1,
      highWatermark: 1,
      lowWatermark: 0.001,
      gateThreshold: 0.15,
      reclaimFloor: 0.05,
      refreshWindowMs: HOUR_MS,
      evictLossySubsumed: false,
    };
    expect(planReclaim(store, 100, policy).map((s) => s.id)).toEqual(['old', 'new', 'old-refreshed']);
  });
});

describe('standsIn (fast-check)', () => {
  const ATOMS = ['num:7', 'time:16:00', 'qty:30 day', 'money:USD:5000', 'name:acme'];
  it('a stand-in stands in only while active and unexpired, and, claimed lossless, holds every atom', () => {
    fc.assert(
      fc.property(
        fc.record({
          isActive: fc.boolean(),
          volatile: fc.boolean(),
          freshUntil: fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined }),
          atoms: fc.subarray(ATOMS),
        }),
        fc.subarray(ATOMS),
        fc.boolean(),
        fc.integer({ min: 0, max: 20 }),
        (raw, entryAtoms, lossy, asOf) => {
          const summary = {
            isActive: raw.isActive,
            validity: {
              volatile: raw.volatile,
              ...(raw.freshUntil !== undefined && { freshUntil: raw.freshUntil }),
            },
            atoms: raw.atoms,
          };
          const expired = raw.volatile && raw.freshUntil !== undefined && asOf > raw.freshUntil;
          const holdsAll = entryAtoms.every((a) => raw.atoms.includes(a));
          expect(standsIn(summary, { atoms: entryAtoms }, lossy, asOf)).toBe(
            raw.isActive && !expired && (lossy || holdsAll),
          );
        },
      ),
    );
  });
});
