import { describe, expect, it } from 'vitest';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { ERASED, type Tombstone } from '../../store/db';
import { interleaveOnce } from '../support/faults';
import { useTestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * Reclaim deletes only what the document it deletes proves dead: an entry that changed after
 * the plan read it (refreshed by a concurrent run, or its stand-in summary erased) stays, and
 * no tombstone claims a stand-in that is gone.
 */
const T0 = Date.UTC(2025, 8, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

const env = useTestEnv({ MEMGATE_HOT_CAPACITY: '6', MEMGATE_LOW_WATERMARK: '0.5' });

/**
 * Two near-duplicate courier notes (summarised on night 1, gated and past their refresh
 * window by day 10), then five fresh notes: night 10 evicts the couriers behind the summary.
 */
async function couriersDueForEviction(name: string) {
  const agentId = env.agent(name);
  const { entries } = await env.client.write({
    agentId,
    entries: [
      { text: 'Courier pickups leave from dock 7 at 16:00.', salience: 0.2, writtenAt: dayAt(0, 9) },
      { text: 'Courier pickups leave from dock 7 at 16:00!', salience: 0.2, writtenAt: dayAt(0, 10) },
    ],
  });
  await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
  const summary = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
  await env.client.write({
    agentId,
    entries: ['boiler serviced', 'taxes filed', 'banners ordered', 'notice approved', 'interns start'].map(
      (t, i) => ({ text: `Office note: ${t}.`, salience: 0.9, writtenAt: dayAt(9, 10) + i }),
    ),
  });
  return { agentId, couriers: entries.map((e) => e.id), summaryId: summary._id };
}

/** Something happens right before reclaim writes the first eviction tombstone. */
function beforeFirstEviction(write: (id: string) => Promise<void>): () => void {
  return interleaveOnce(
    env.worker.store,
    'tombstones',
    'replaceOne',
    (args) => write((args[0] as { _id: string })._id),
    (args) => !('reason' in (args[1] as Tombstone) && (args[1] as Tombstone).reason.startsWith('erased')),
  );
}

describe('reclaim against a change made after its plan', () => {
  it('the baseline: with nothing in between, night 10 evicts both couriers behind the summary', async () => {
    const { agentId, couriers, summaryId } = await couriersDueForEviction('evict-baseline');
    const report = await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
    expect(report.counts.evicted).toBe(2);
    for (const id of couriers) {
      expect(await env.store.tombstones.findOne({ _id: id })).toMatchObject({
        standIn: { summaryId, lossy: false },
      });
    }
    await expectVerified(env, agentId);
  }, 300_000);

  it('its stand-in summary erased in between: the courier stays', async () => {
    const { agentId, couriers, summaryId } = await couriersDueForEviction('evict-stand-in-erased');
    const undo = beforeFirstEviction(async () => {
      await env.client.forget({ agentId, entryId: summaryId });
    });
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
    } finally {
      undo();
    }
    // Nothing stands in for them any more: neither is deleted, and no tombstone says otherwise.
    for (const id of couriers) {
      const stored =
        (await env.store.hot.countDocuments({ _id: id })) +
        (await env.store.cold.countDocuments({ _id: id }));
      expect(stored, id).toBe(1);
      expect(await env.store.tombstones.findOne({ _id: id }), id).toBeNull();
    }
    await expectVerified(env, agentId);
  }, 300_000);

  it('itself erased in between: its erasure tombstone stands, with no term or atom of it', async () => {
    const { agentId } = await couriersDueForEviction('evict-erased');
    let erased = '';
    const undo = beforeFirstEviction(async (id) => {
      erased = id;
      await env.client.forget({ agentId, entryId: id });
    });
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
    } finally {
      undo();
    }
    expect(erased).not.toBe('');
    const stone = await env.store.tombstones.findOne({ _id: erased });
    expect(stone).toMatchObject({ reason: ERASED, terms: [], termKeys: [] });
    expect(stone).not.toHaveProperty('atoms');
    expect(await env.store.hot.countDocuments({ _id: erased })).toBe(0);
    expect(await env.store.cold.countDocuments({ _id: erased })).toBe(0);
    await expectVerified(env, agentId);
  }, 300_000);

  it('refreshed in between (by a concurrent run): the entry stays', async () => {
    const { agentId, couriers } = await couriersDueForEviction('evict-refreshed');
    let refreshed = '';
    const undo = beforeFirstEviction(async (id) => {
      refreshed = id;
      // What a refresh does: a new salience base and gate, a new version.
      await env.worker.store.hot.updateOne(
        { _id: id },
        {
          $set: {
            salience: { base: 0.5, at: dayAt(10, 2) },
            dormantAt: dayAt(13, 0),
            refreshedAt: dayAt(10, 2),
          },
          $inc: { version: 1 },
        },
      );
    });
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
    } finally {
      undo();
    }
    expect(couriers).toContain(refreshed);
    expect(await env.store.hot.findOne({ _id: refreshed })).toMatchObject({ refreshedAt: dayAt(10, 2) });
    expect(await env.store.tombstones.findOne({ _id: refreshed })).toBeNull();
    await expectVerified(env, agentId);
  }, 300_000);
});
