import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { buildEntry, memoryPolicy, type Entry } from '../../core/entry';
import { parseConfig } from '../../core/config';
import { storeLimitsOf } from '../../store/guard';
import { openStore, type Store } from '../../store/db';
import { insertNewEntries } from '../../store/entries';
import { supersedePhase } from '../../core/nightly/phases';
import type { ReclaimStep } from '../../core/nightly/reclaim';
import { evictEntry, retireSummary } from '../../store/nightly';
import { mongoNight } from '../../store/nightStore';
import { verifyStore } from '../../store/verify';
import { restoreEntry } from '../../store/restore';
import { ConflictError } from '../../core/errors';

/**
 * A summary can stand in for an entry reclaim deleted, and later be retired because another
 * of its sources was superseded (docs/invariants.md, Current summaries). The deleted entry's
 * facts then live only in the retired summary, which stays stored for deep recall: its
 * tombstone must say so, and `memgate verify` must accept what it says, not report a stand-in
 * that silently stopped standing.
 */
const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
const T0 = Date.UTC(2025, 0, 1);
let store: Store;

beforeAll(async () => {
  store = await openStore(
    inject('mongoUri'),
    `test_retired_${randomUUID().slice(0, 8)}`,
    storeLimitsOf(parseConfig({})),
  );
});
afterAll(async () => {
  await store?.db.dropDatabase();
  await store?.close();
});

function fact(agentId: string, id: string, text: string, extra: Partial<Entry> = {}): Entry {
  const base = buildEntry(
    id,
    agentId,
    {
      text,
      kind: 'fact',
      salience: 0.5,
      source: { origin: 'user' },
      confidence: 0.5,
      verified: false,
      volatile: false,
      writtenAt: T0,
    },
    policy,
  );
  return { ...base, ...extra };
}

/** Reclaim deletes `entry` on the first night, `summary` standing in for it losslessly. */
async function evictBehind(entry: Entry, summary: Entry): Promise<void> {
  const night = { agentId: entry.agentId, asOf: T0 + 86_400_000, runId: `${entry.agentId}@night1` };
  const step = {
    id: entry._id,
    action: 'evict',
    why: 'dead: gated, refresh window elapsed, subsumed losslessly',
    rank: 0,
    inputs: {},
    standIn: { summaryId: summary._id, lossy: false },
  } as unknown as ReclaimStep;
  expect(await evictEntry(store, night, entry, step)).toBe(true);
}

describe('a retired summary standing in for an evicted entry', () => {
  it('marks the tombstone retired, keeps the facts reachable, and verify passes', async () => {
    const a = `retired-${randomUUID().slice(0, 8)}`;
    const older = fact(a, `${a}-older`, 'Backups are kept for 14 days.', {
      subject: 'backups',
      attribute: 'retention',
    });
    const sibling = fact(a, `${a}-sibling`, 'Backups run at 02:00 in Frankfurt.');
    const summary = fact(a, `${a}-sum`, 'Backups are kept for 14 days. Backups run at 02:00 in Frankfurt.', {
      kind: 'summary',
      derivedFrom: [older._id, sibling._id],
    });
    await insertNewEntries(store, [older, sibling, summary]);
    // Reclaim deleted the sibling, the summary standing in for it losslessly.
    await store.hot.deleteOne({ _id: sibling._id, agentId: a });
    await store.tombstones.insertOne({
      _id: sibling._id,
      agentId: a,
      terms: sibling.terms,
      termKeys: [],
      reason: 'evicted',
      deletedAt: T0,
      standIn: { summaryId: summary._id, lossy: false },
      atoms: sibling.atoms,
    });
    expect(summary.atoms).toEqual(expect.arrayContaining(sibling.atoms));

    const ctx = { agentId: a, asOf: T0 + 86_400_000, runId: `${a}@night` };
    await retireSummary(store, ctx, summary, { sourceId: older._id, supersededBy: `${a}-newer` });

    expect((await store.hot.findOne({ _id: summary._id }))!.isActive).toBe(false);
    expect((await store.tombstones.findOne({ _id: sibling._id }))!.standIn).toEqual({
      summaryId: summary._id,
      lossy: false,
      retired: true,
    });
    const report = await verifyStore(store, { agentId: a, batch: 10 });
    expect(report.findings).toEqual([]);
  });

  it('is retired when a newer fact supersedes a source reclaim had already deleted', async () => {
    const a = `evicted-${randomUUID().slice(0, 8)}`;
    const keys = { subject: 'backups', attribute: 'retention' };
    const link = { subsumedBy: [{ summaryId: `${a}-sum`, lossless: true }], pending: [] };
    const older = fact(a, `${a}-older`, 'Backups are kept for 14 days.', { ...keys, ...link });
    const sibling = fact(a, `${a}-sibling`, 'Backups run at 02:00 in Frankfurt.', link);
    const summary = fact(a, `${a}-sum`, 'Backups are kept for 14 days. Backups run at 02:00 in Frankfurt.', {
      kind: 'summary',
      derivedFrom: [older._id, sibling._id],
      pending: [],
    });
    await insertNewEntries(store, [older, sibling, summary]);
    await evictBehind(older, summary);

    // Days later the retention changes; the 14-day fact is gone, but its stand-in still says it.
    const newer = fact(a, `${a}-newer`, 'Backups are kept for 30 days.', {
      ...keys,
      writtenAt: T0 + 3 * 86_400_000,
      // A fact written with a subject awaits the supersede phase (core/entry.ts initialPending).
      pending: ['supersede'],
    });
    await insertNewEntries(store, [newer]);
    const night2 = { agentId: a, asOf: T0 + 4 * 86_400_000, runId: `${a}@night2` };
    await supersedePhase(mongoNight(store, night2, 10));

    expect((await store.hot.findOne({ _id: summary._id }))!.isActive).toBe(false);
    expect((await store.tombstones.findOne({ _id: older._id }))!.standIn).toMatchObject({ retired: true });
    expect((await store.hot.findOne({ _id: newer._id }))!.isActive).toBe(true);
    // The sibling, released from the retired summary, awaits clustering again.
    expect((await store.hot.findOne({ _id: sibling._id }))!.pending).toContain('cluster');
    const report = await verifyStore(store, { agentId: a, batch: 10 });
    expect(report.findings).toEqual([]);

    // Its sibling is current, but the deleted fact it holds is not: it stays retired.
    const refused = await restoreEntry(store, a, summary._id, { at: T0 + 5 * 86_400_000 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as ConflictError).details).toMatchObject({ id: summary._id, source: older._id });
    expect((await store.hot.findOne({ _id: summary._id }))!.isActive).toBe(false);
    expect(await store.ledger.countDocuments({ agentId: a, event: 'restore' })).toBe(0);
  });

  it('still current while a newer fact supersedes the source it stands in for, is named by verify', async () => {
    const a = `unretired-${randomUUID().slice(0, 8)}`;
    const keys = { subject: 'backups', attribute: 'retention' };
    const link = { subsumedBy: [{ summaryId: `${a}-sum`, lossless: true }], pending: [] };
    const older = fact(a, `${a}-older`, 'Backups are kept for 14 days.', { ...keys, ...link });
    const summary = fact(a, `${a}-sum`, 'Backups are kept for 14 days.', {
      kind: 'summary',
      derivedFrom: [older._id],
      pending: [],
    });
    await insertNewEntries(store, [older, summary]);
    await evictBehind(older, summary);
    expect((await verifyStore(store, { agentId: a, batch: 10 })).findings).toEqual([]);
    // A newer fact, its night's supersede phase lost: the summary still says 14 days.
    await insertNewEntries(store, [
      fact(a, `${a}-newer`, 'Backups are kept for 30 days.', {
        ...keys,
        writtenAt: T0 + 3 * 86_400_000,
        pending: [],
      }),
    ]);
    const report = await verifyStore(store, { agentId: a, batch: 10 });
    expect(report.findings).toEqual([
      expect.objectContaining({ check: 'summary-not-current', id: summary._id }),
    ]);
  });
});
