import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { WriteEntryInput } from '../../core/entry';
import { InvalidInputError, NotFoundError } from '../../core/errors';
import { DAY_MS, HOUR_MS, salienceAt } from '../../core/salience';
import { consolidateAgentWorkflowId } from '../../core/ids';
import { failOnce } from '../support/faults';
import { untilEmbedded, untilHotEmbedded } from '../support/embedded';
import { useTestEnv } from '../support/env';
import { expectCensusKept } from '../support/census';
import { expectVerified } from '../support/verify';

/** Half-life 72 h, gate 0.15, a hot tier of 20 entries that reclaims down to 16. */
const SETTINGS = {
  MEMGATE_HALF_LIFE_HOURS: '72',
  MEMGATE_GATE_THRESHOLD: '0.15',
  MEMGATE_RECLAIM_FLOOR: '0.05',
  MEMGATE_REFRESH_WINDOW_HOURS: '168',
  MEMGATE_HOT_CAPACITY: '20',
  MEMGATE_HIGH_WATERMARK: '1',
  MEMGATE_LOW_WATERMARK: '0.8',
  MEMGATE_NIGHTLY_BATCH: '4',
};

const T0 = Date.UTC(2025, 2, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;
/** Nightly runs happen at 03:00 of each simulated day; the agent writes and asks at 10:00. */
const night = (day: number) => dayAt(day, 3);

const env = useTestEnv(SETTINGS);

const newAgent = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

async function write(agentId: string, entries: WriteEntryInput[]): Promise<string[]> {
  const res = await env.client.write({ agentId, entries });
  return res.entries.map((e) => e.id);
}

/** Lexically distinct background entries, so none of them merge with each other. */
const TOPICS = [
  'quarterly invoice reconciliation',
  'office plant watering rota',
  'printer toner reorder',
  'parking permit renewal',
  'team offsite catering',
  'laptop firmware rollout',
  'badge reader outage',
  'expense report deadline',
  'fire drill schedule',
  'visitor wifi password rotation',
  'kitchen dishwasher repair',
  'conference room booking',
  'onboarding checklist review',
  'travel policy update',
  'security training reminder',
  'desk move coordination',
  'holiday calendar publication',
  'vendor portal login',
  'mailroom opening hours',
  'recycling bin collection',
  'ergonomic chair request',
  'coffee machine descaling',
  'elevator maintenance notice',
  'town hall recording',
  'payroll cutoff reminder',
  'shuttle bus timetable',
  'locker key inventory',
  'whiteboard marker supply',
  'plumbing inspection visit',
  'window cleaning contract',
];
function filler(day: number, count: number, salience: number, offset: number): WriteEntryInput[] {
  return Array.from({ length: count }, (_, i) => ({
    text: `Note about the ${TOPICS[(offset + i) % TOPICS.length]} (day ${day}, item ${i}).`,
    salience,
    writtenAt: dayAt(day, 10) + i,
    idempotencyKey: `filler-${day}-${i}`,
  }));
}

async function tiersOf(agentId: string, id: string) {
  const [hot, cold, stone] = await Promise.all([
    env.store.hot.countDocuments({ _id: id, agentId }),
    env.store.cold.countDocuments({ _id: id, agentId }),
    env.store.tombstones.countDocuments({ _id: id, agentId }),
  ]);
  return { hot, cold, stone };
}

/**
 * After a run (docs/invariants.md, Moves lose nothing): every entry ever written is in
 * exactly one tier, or evicted with a tombstone; and the census the store kept is the one
 * counted from scratch.
 */
async function expectNothingLostOrDoubled(agentId: string, ids: string[]) {
  for (const id of ids) {
    const { hot, cold, stone } = await tiersOf(agentId, id);
    expect({ id, placed: hot + cold + stone }).toEqual({ id, placed: 1 });
  }
  await expectVerified(env, agentId);
  await expectCensusKept(env.store, agentId);
}

const NOTICE_QUERY = "What is the supplier's notice period?";

describe('the supplier case, night by night', () => {
  /**
   * Days 0-2 background notes; day 3 the fact (30 days), written once; day 6 a summary of
   * an earlier draft (14 days); from day 11 new notes push the hot tier past capacity; on
   * day 14 the agent asks for the notice period.
   */
  async function writeScenario(agentId: string, day: number, ids: string[]) {
    if (day <= 2) ids.push(...(await write(agentId, filler(day, 3, 0.7, day * 3))));
    if (day === 3) {
      ids.push(
        ...(await write(agentId, [
          {
            text: "The supplier's contractual notice period is 30 days.",
            kind: 'fact',
            salience: 0.5,
            writtenAt: dayAt(3, 10),
            idempotencyKey: 'notice-fact',
          },
        ])),
      );
    }
    if (day === 6) {
      ids.push(
        ...(await write(agentId, [
          {
            text: "Summary of an earlier contract draft: the supplier's notice period is 14 days.",
            salience: 0.9,
            writtenAt: dayAt(6, 10),
            idempotencyKey: 'draft-summary',
          },
        ])),
      );
    }
    if (day >= 11 && day <= 14) ids.push(...(await write(agentId, filler(day, 5, 0.7, 9 + (day - 11) * 5))));
  }

  /** The seed's policy, kept here only: over capacity, delete the least salient entries, no trace. */
  async function salienceRankedDeletion(agentId: string, asOf: number) {
    const hot = await env.store.hot.find({ agentId }).toArray();
    const capacity = Number(SETTINGS.MEMGATE_HOT_CAPACITY);
    if (hot.length <= capacity) return;
    const halfLifeMs = Number(SETTINGS.MEMGATE_HALF_LIFE_HOURS) * HOUR_MS;
    hot.sort((a, b) => salienceAt(a.salience, asOf, halfLifeMs) - salienceAt(b.salience, asOf, halfLifeMs));
    const keep = Math.floor(capacity * Number(SETTINGS.MEMGATE_LOW_WATERMARK));
    for (const e of hot.slice(0, hot.length - keep)) await env.store.hot.deleteOne({ _id: e._id, agentId });
  }

  it('memgate answers 30 days; salience-ranked deletion answers the stale 14 days with nothing missing', async () => {
    const memgate = newAgent('supplier-memgate');
    const seed = newAgent('supplier-seed');
    const ids: Record<string, string[]> = { [memgate]: [], [seed]: [] };
    for (let day = 0; day <= 14; day++) {
      if (day >= 1) {
        await env.client.consolidate({ agentId: memgate, asOf: night(day) });
        await expectNothingLostOrDoubled(memgate, ids[memgate]!);
        await salienceRankedDeletion(seed, night(day));
      }
      await writeScenario(memgate, day, ids[memgate]!);
      await writeScenario(seed, day, ids[seed]!);
    }
    const factId = ids[memgate]![9]!;
    const asked = dayAt(14, 11);

    // The seed deleted the fact as dead weight: deep recall returns only the draft, and says nothing is missing.
    const seedDeep = await env.client.recall({ agentId: seed, query: NOTICE_QUERY, deep: true, asOf: asked });
    expect(seedDeep.hits[0]!.text).toContain('14 days');
    expect(seedDeep.hits.some((h) => h.text.includes('30 days'))).toBe(false);
    expect(seedDeep.missing).toEqual([]);

    // memgate spilled it: it is still there, in cold, with its provenance.
    expect(await tiersOf(memgate, factId)).toEqual({ hot: 0, cold: 1, stone: 0 });
    await untilHotEmbedded(env.store, memgate);
    const hotBefore = await env.store.hot.find({ agentId: memgate }).toArray();
    const deep = await env.client.recall({ agentId: memgate, query: NOTICE_QUERY, deep: true, asOf: asked });
    const fact = deep.hits.find((h) => h.id === factId);
    expect(fact).toMatchObject({ tier: 'cold', dormant: true, isActive: true, kind: 'fact' });
    expect(fact!.text).toContain('30 days');
    // Recall is read-only (docs/invariants.md, Read-only recall).
    expect(await env.store.hot.find({ agentId: memgate }).toArray()).toEqual(hotBefore);

    // The nightly refresh brings it back: default recall now leads with the two statements of
    // the notice period, the 30 days among them. Which of the two comes first is the model's
    // view of their wording (the draft's is nearer the question); the draft is not a fact
    // with a subject and attribute, so nothing supersedes it.
    const report = await env.client.consolidate({ agentId: memgate, asOf: night(15) });
    expect(report.counts.rehydrated).toBeGreaterThanOrEqual(1);
    await expectNothingLostOrDoubled(memgate, ids[memgate]!);
    const after = await env.client.recall({ agentId: memgate, query: NOTICE_QUERY, asOf: dayAt(15, 10) });
    const leading = after.hits.slice(0, 2);
    expect(leading.map((h) => h.text).sort()).toEqual([
      "Summary of an earlier contract draft: the supplier's notice period is 14 days.",
      "The supplier's contractual notice period is 30 days.",
    ]);
    expect(leading.find((h) => h.id === factId)).toMatchObject({
      tier: 'hot',
      dormant: false,
      foundBy: 'both',
    });
    const finalDeep = await env.client.recall({
      agentId: memgate,
      query: NOTICE_QUERY,
      deep: true,
      asOf: dayAt(15, 10),
    });
    // A summary of the fact that dropped the 30 days says it is lossy. (Neighbours by meaning
    // bring summaries of unrelated notes too; only the fact's own summaries are in question.)
    for (const hit of finalDeep.hits.filter((h) => h.kind === 'summary')) {
      const summary =
        (await env.store.hot.findOne({ _id: hit.id })) ?? (await env.store.cold.findOne({ _id: hit.id }));
      if (summary!.derivedFrom?.includes(factId) && !hit.text.includes('30 days'))
        expect(hit.lossy_summary).toBe(true);
    }

    // Every run left its counts in a runs document, and capacity was reclaimed by spilling.
    const runs = await env.store.runs.find({ agentId: memgate }).toArray();
    expect(runs).toHaveLength(15);
    const spilled = runs.reduce((n, r) => n + Number((r.counts as Record<string, number>).spilled), 0);
    expect(spilled).toBeGreaterThan(0);
    expect(await env.store.hot.countDocuments({ agentId: memgate })).toBeLessThanOrEqual(20);
  }, 900_000);
});

describe('gating is not a lifecycle predicate (docs/invariants.md, Gating is not lifecycle)', () => {
  it('long-dormant entries within capacity stay in hot, untouched', async () => {
    const agentId = newAgent('dormant');
    const ids = await write(agentId, filler(0, 8, 0.16, 0));
    // The first night settles the bookkeeping of new writes (core/nightly/phases.ts); from then on
    // a night with nothing to do for these entries leaves their documents as they are.
    await env.client.consolidate({ agentId, asOf: night(1) });
    const before = await env.store.hot.find({ agentId }).toArray();
    const report = await env.client.consolidate({ agentId, asOf: night(60) });
    expect(report.counts).toMatchObject({ spilled: 0, evicted: 0, refreshed: 0, summarised: 0 });
    expect(await env.store.hot.find({ agentId }).toArray()).toEqual(before);
    await expectNothingLostOrDoubled(agentId, ids);
  }, 120_000);
});

describe('crash safety', () => {
  it('reclaim interrupted between the cold copy and the hot delete retries and converges', async () => {
    const agentId = newAgent('crash-spill');
    const ids = [
      ...(await write(agentId, filler(0, 12, 0.6, 0))),
      ...(await write(agentId, filler(1, 12, 0.6, 12))),
    ];
    const atCrash: { hot: number; cold: number; stone: number }[] = [];
    const undo = failOnce(env.worker.store, 'hot', 'deleteMany', async (args) => {
      const { _id } = args[0] as { _id: { $in: string[] } };
      for (const id of _id.$in) atCrash.push(await tiersOf(agentId, id));
    });
    try {
      const report = await env.client.consolidate({ agentId, asOf: night(2) });
      expect(report.counts.spilled).toBe(24 - 16);
      expect(report.store).toMatchObject({ hot: 16, cold: 8 });
    } finally {
      undo();
    }
    // The process "died" with the batch in both tiers — never in neither.
    expect(atCrash).toEqual(Array(4).fill({ hot: 1, cold: 1, stone: 0 }));
    await expectNothingLostOrDoubled(agentId, ids);
    expect(await env.store.ledger.countDocuments({ agentId, event: 'spill' })).toBe(8);

    // The failed attempt shows in the run's history, and the retry finished the phase.
    const history = await env.client.temporal.workflow
      .getHandle(consolidateAgentWorkflowId(agentId, night(2)))
      .fetchHistory();
    const reclaimAttempts = history
      .events!.filter((e) => e.activityTaskStartedEventAttributes)
      .map((e) => e.activityTaskStartedEventAttributes!.attempt);
    expect(reclaimAttempts).toContain(2);
    expect(history.events!.filter((e) => e.activityTaskFailedEventAttributes)).toHaveLength(0);
  }, 300_000);

  it("refresh's cold → hot move interrupted between the hot copy and the cold delete converges", async () => {
    const agentId = newAgent('crash-rehydrate');
    const ids = [
      ...(await write(agentId, [
        { text: 'The vendor escrow account number is 88-1234.', salience: 0.4, writtenAt: dayAt(0, 10) },
      ])),
      ...(await write(agentId, filler(1, 23, 0.6, 1))),
    ];
    await env.client.consolidate({ agentId, asOf: night(2) });
    expect(await tiersOf(agentId, ids[0]!)).toEqual({ hot: 0, cold: 1, stone: 0 });
    // Rehydration fills only the room below the low watermark, where reclaim left hot:
    // forgetting the newest filler (still hot) makes room for one.
    await env.client.forget({ agentId, entryId: ids[ids.length - 1]! });
    await env.client.recall({ agentId, query: 'vendor escrow account number', asOf: dayAt(2, 12) });

    const atCrash: { hot: number; cold: number; stone: number }[] = [];
    const undo = failOnce(env.worker.store, 'cold', 'deleteOne', async () => {
      atCrash.push(await tiersOf(agentId, ids[0]!));
    });
    try {
      const report = await env.client.consolidate({ agentId, asOf: night(3) });
      expect(report.counts.rehydrated).toBe(1);
    } finally {
      undo();
    }
    expect(atCrash).toEqual([{ hot: 1, cold: 1, stone: 0 }]);
    await expectNothingLostOrDoubled(agentId, ids);
    const back = (await env.store.hot.findOne({ _id: ids[0]!, agentId }))!;
    expect(back.refreshedAt).toBe(night(3));
    expect(back.dormantAt).toBeGreaterThan(night(3));
    const { hits } = await env.client.recall({ agentId, query: 'vendor escrow account', asOf: dayAt(3, 10) });
    expect(hits[0]!.id).toBe(ids[0]);
  }, 300_000);
});

describe('consolidation, eviction, supersession and restore on one agent', () => {
  it('merges near-duplicates, evicts only dead subsumed entries with tombstones, and deep recall walks supersession', async () => {
    const agentId = newAgent('lifecycle');
    const dupes = await write(agentId, [
      {
        text: 'Acme ships orders from the Rotterdam warehouse every Tuesday.',
        salience: 0.2,
        writtenAt: dayAt(0, 9),
      },
      {
        text: 'Acme ships orders from the Rotterdam warehouse every Tuesday!',
        salience: 0.2,
        writtenAt: dayAt(0, 10),
      },
      {
        text: 'Acme ships orders from the Rotterdam warehouse every Tuesday. Pallets are capped at 500 kg.',
        salience: 0.2,
        writtenAt: dayAt(0, 11),
      },
    ]);
    const [older, newer] = await write(agentId, [
      {
        text: 'The Acme account manager is Dana Whitfield.',
        kind: 'fact',
        subject: 'acme',
        attribute: 'account manager',
        salience: 0.9,
        writtenAt: dayAt(1, 10),
      },
      {
        text: 'Acme reassigned us to a new contact, Omar Haddad.',
        kind: 'fact',
        subject: 'acme',
        attribute: 'account manager',
        salience: 0.9,
        writtenAt: dayAt(2, 10),
      },
    ]);

    // The write path's embedding is done, so the night embeds only the summary it writes.
    await untilEmbedded(env.store, agentId, [...dupes, older!, newer!]);
    const first = await env.client.consolidate({ agentId, asOf: night(3) });
    expect(first.counts).toMatchObject({
      summarised: 1,
      lossySummaries: 0,
      superseded: 1,
      spilled: 0,
      evicted: 0,
    });
    const summary = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
    expect(summary).toMatchObject({ lossy_summary: false, derivedFrom: dupes });
    expect(summary.text).toContain('500 kg');
    for (const id of dupes) {
      expect((await env.store.hot.findOne({ _id: id }))!.subsumedBy).toEqual([
        { summaryId: summary._id, lossless: true },
      ]);
    }
    // Rerunning the same night changes nothing and reports the same counts, but for the
    // embed phase, which counts vectors it computed: the first run embedded the summary.
    expect(first.counts.embedded).toBe(1);
    const again = (await env.client.consolidate({ agentId, asOf: night(3) })).counts;
    expect(again).toEqual({ ...first.counts, embedded: 0 });

    // Supersession: default recall hides the old manager; deep recall finds it and walks to the new one.
    const byDefault = await env.client.recall({
      agentId,
      query: 'Acme account manager Dana',
      asOf: dayAt(3, 10),
    });
    expect(byDefault.hits.map((h) => h.id)).not.toContain(older);
    const deep = await env.client.recall({
      agentId,
      query: 'Acme account manager Dana',
      deep: true,
      asOf: dayAt(3, 10),
    });
    expect(deep.hits.find((h) => h.id === older)).toMatchObject({ isActive: false, supersededBy: newer });
    expect(deep.successors!.map((h) => h.id)).toContain(newer);
    expect(deep.successors!.find((h) => h.id === newer)).toMatchObject({ isActive: true, supersedes: older });

    // Capacity pressure after the duplicates' refresh window: the subsumed, dead ones are evicted.
    await write(agentId, filler(9, 20, 0.9, 0));
    const pressured = await env.client.consolidate({ agentId, asOf: night(10) });
    expect(pressured.counts.evicted).toBe(3);
    for (const id of dupes) {
      expect(await tiersOf(agentId, id)).toEqual({ hot: 0, cold: 0, stone: 1 });
      const stone = (await env.store.tombstones.findOne({ _id: id }))!;
      expect(stone).toMatchObject({
        standIn: { summaryId: summary._id, lossy: false },
        deletedAt: night(10),
      });
      expect(JSON.stringify(stone)).not.toContain('Rotterdam warehouse every');
    }
    const ledger = await env.store.ledger.find({ agentId, event: 'evict' }).toArray();
    expect(ledger.map((l) => l.inputs)).toEqual(
      Array(3).fill(
        expect.objectContaining({ gated: true, refreshWindowElapsed: true, subsumedLosslessly: true }),
      ),
    );
    // The superseded fact was spilled, not evicted: nothing subsumes it.
    expect(await tiersOf(agentId, older!)).toEqual({ hot: 0, cold: 1, stone: 0 });

    // Deep recall says what is missing, and what stands in for it.
    const missing = await env.client.recall({
      agentId,
      query: 'Rotterdam warehouse pallets',
      deep: true,
      asOf: dayAt(10, 10),
    });
    expect(missing.missing!.map((m) => m.tombstoneId).sort()).toEqual([...dupes].sort());
    expect(missing.missing![0]!.standIn).toEqual({ summaryId: summary._id, lossy: false });
    expect(missing.hits.map((h) => h.id)).toContain(summary._id);

    // Restore reverses the supersession, in cold too, with a ledger record; the next night keeps it.
    const restored = await env.client.restore({ agentId, entryId: older! });
    expect(restored).toEqual({ id: older, tier: 'cold', restored: ['supersession'] });
    const back = (await env.store.cold.findOne({ _id: older! }))!;
    expect(back.isActive).toBe(true);
    expect(back.supersededBy).toBeUndefined();
    const successor =
      (await env.store.hot.findOne({ _id: newer! })) ?? (await env.store.cold.findOne({ _id: newer! }));
    expect(successor!.supersedes).toBeUndefined();
    expect(await env.store.ledger.countDocuments({ agentId, event: 'restore', entryId: older })).toBe(1);
    expect((await env.client.consolidate({ agentId, asOf: night(11) })).counts.superseded).toBe(0);
    expect((await env.store.cold.findOne({ _id: older! }))!.isActive).toBe(true);

    await expect(env.client.restore({ agentId, entryId: 'no-such-entry' })).rejects.toBeInstanceOf(
      NotFoundError,
    );
  }, 600_000);

  it('expires volatile facts out of default recall without deleting them, and renews them on restore', async () => {
    const agentId = newAgent('expiry');
    const [quota] = await write(agentId, [
      {
        text: 'The API rate limit is 600 requests per minute.',
        kind: 'fact',
        volatile: true,
        freshUntil: dayAt(2, 0),
        salience: 0.9,
        writtenAt: dayAt(0, 10),
      },
    ]);
    expect((await env.client.consolidate({ agentId, asOf: night(1) })).counts.expired).toBe(0);
    expect((await env.client.consolidate({ agentId, asOf: night(3) })).counts.expired).toBe(1);
    expect((await env.store.hot.findOne({ _id: quota! }))!.expiredAt).toBe(night(3));
    const query = { agentId, query: 'API rate limit requests', asOf: dayAt(3, 10) };
    expect((await env.client.recall(query)).hits).toEqual([]);
    expect((await env.client.recall({ ...query, deep: true })).hits[0]).toMatchObject({
      id: quota,
      expired: true,
    });

    // Renewed until a time already past, it would read as current though still expired.
    await expect(env.client.restore({ agentId, entryId: quota!, freshUntil: 0 })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    expect(await env.store.hot.findOne({ _id: quota! })).toMatchObject({
      expiredAt: night(3),
      validity: { volatile: true, freshUntil: dayAt(2, 0) },
    });
    // After the restore's own time, which is the clock's, not the simulated days'.
    const freshUntil = Date.now() + 30 * DAY_MS;
    await env.client.restore({ agentId, entryId: quota!, freshUntil });
    const renewed = (await env.store.hot.findOne({ _id: quota! }))!;
    expect(renewed.expiredAt).toBeUndefined();
    expect(renewed.validity.freshUntil).toBe(freshUntil);
    expect((await env.client.recall(query)).hits.map((h) => h.id)).toEqual([quota]);
  }, 300_000);
});
