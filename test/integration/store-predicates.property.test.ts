import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseConfig } from '../../core/config';
import { buildEntry, memoryPolicy, type Entry } from '../../core/entry';
import { dueForExpiry, planRefresh, QueryIndex, refreshPolicy } from '../../core/nightly/plans';
import { expirePhase, refreshPhase, type NightPolicy, type NightRun } from '../../core/nightly/phases';
import { inDefaultRecall } from '../../core/recall';
import { reclaimPolicy } from '../../core/nightly/reclaim';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { ensureIndexes, openStore, type Store } from '../../store/db';
import { storeLimitsOf } from '../../store/guard';
import { findCandidates, insertNewEntries, logQuery } from '../../store/entries';
import { mongoNight } from '../../store/nightStore';

/**
 * The store reads by equality keys and the core decides (docs/invariants.md, Index-driven):
 * for random stores, what the store's reads select agrees with the core's predicate applied
 * to every entry — the gate of default recall, expiry, and the refresh window.
 */

const config = parseConfig({ MEMGATE_HOT_CAPACITY: '1000' });
const policy: NightPolicy = {
  memory: memoryPolicy(config),
  refresh: refreshPolicy(config),
  reclaim: reclaimPolicy(config),
  cluster: { similarity: config.clusterSimilarity, neighbours: config.clusterNeighbours },
  batch: 7,
  queryLogRetentionDays: config.queryLogRetentionDays,
};
const NOW = Date.UTC(2026, 5, 1, 3);
const VOCABULARY = ['harbour', 'invoice', 'lantern', 'meadow', 'orchid', 'pylon', 'quartz', 'ribbon'];

let store: Store;
beforeAll(async () => {
  store = await openStore(
    inject('mongoUri'),
    `test_predicates_${randomUUID().slice(0, 8)}`,
    storeLimitsOf(config),
  );
  await ensureIndexes(store);
});
afterAll(async () => {
  await store?.db.dropDatabase();
  await store?.close();
});

const entryArb = fc.record({
  words: fc.subarray(VOCABULARY, { minLength: 1, maxLength: 4 }),
  salience: fc.double({ min: 0.02, max: 1, noNaN: true }),
  ageHours: fc.integer({ min: 0, max: 20 * 24 }),
  volatile: fc.boolean(),
  freshOffsetHours: fc.integer({ min: -72, max: 72 }),
});

type EntrySpec = typeof entryArb extends fc.Arbitrary<infer T> ? T : never;

async function storeOf(specs: EntrySpec[]): Promise<{ agentId: string; entries: Entry[] }> {
  const agentId = `p-${randomUUID().slice(0, 8)}`;
  const entries = specs.map((s, i) =>
    buildEntry(
      `${agentId}-${i}`,
      agentId,
      {
        text: `Entry ${i} about ${s.words.join(' and ')}.`,
        kind: 'fact',
        salience: s.salience,
        source: { origin: 'agent' },
        confidence: 0.5,
        verified: false,
        volatile: s.volatile,
        ...(s.volatile ? { freshUntil: NOW + s.freshOffsetHours * HOUR_MS } : {}),
        writtenAt: NOW - s.ageHours * HOUR_MS,
      },
      policy.memory,
    ),
  );
  await insertNewEntries(store, entries);
  return { agentId, entries };
}

const run = (agentId: string, asOf: number): NightRun => ({ agentId, asOf, runId: `${agentId}:${asOf}` });

describe('store reads agree with the core predicates (fast-check, real store)', () => {
  it('default recall, after a night: the candidates are exactly the entries sharing a term that pass the gate', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(entryArb, { minLength: 1, maxLength: 25 }),
        fc.subarray(VOCABULARY, { minLength: 1, maxLength: 3 }),
        async (specs, query) => {
          const { agentId, entries } = await storeOf(specs);
          // As after a night: entries past the gate have left the live postings.
          const r = run(agentId, NOW);
          await refreshPhase(mongoNight(store, r, policy.batch), r, policy);
          const found = await findCandidates(store, { agentId, terms: query, now: NOW, deep: false });
          const expected = entries.filter(
            (e) => e.terms.some((t) => query.includes(t)) && inDefaultRecall(e, NOW),
          );
          expect(found.map((c) => c.entry._id).sort()).toEqual(expected.map((e) => e._id).sort());
        },
      ),
      { numRuns: 15 },
    );
  });

  it('expiry: the expire phase annotates exactly the entries due for expiry', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(entryArb, { minLength: 1, maxLength: 25 }), async (specs) => {
        const { agentId, entries } = await storeOf(specs);
        const r = run(agentId, NOW);
        await expirePhase(mongoNight(store, r, policy.batch), r);
        const expired = await store.hot.find({ agentId, expiredAt: NOW }).toArray();
        const expected = entries.filter((e) => dueForExpiry(e, NOW));
        expect(expired.map((e) => e._id).sort()).toEqual(expected.map((e) => e._id).sort());
      }),
      { numRuns: 15 },
    );
  });

  it('refresh window: the refresh phase refreshes exactly the hot entries the core plans for', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(entryArb, { minLength: 1, maxLength: 25 }),
        fc.array(fc.subarray(VOCABULARY, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 3 }),
        async (specs, queries) => {
          const { agentId, entries } = await storeOf(specs);
          for (const q of queries) {
            await logQuery(store, {
              _id: randomUUID(),
              agentId,
              query: q.join(' '),
              terms: q,
              at: NOW - DAY_MS / 2,
              deep: false,
              k: 10,
              hitIds: [],
            });
          }
          const r = run(agentId, NOW);
          await refreshPhase(mongoNight(store, r, policy.batch), r, policy);
          const refreshed = await store.hot.find({ agentId, refreshedAt: NOW }).toArray();
          const expected = planRefresh(
            entries.map((entry) => ({ entry, tier: 'hot' as const })),
            new QueryIndex(queries),
            new Set(),
            NOW,
            policy.refresh,
          );
          expect(refreshed.map((e) => e._id).sort()).toEqual(expected.map((s) => s.id).sort());
        },
      ),
      { numRuns: 15 },
    );
  });
});
