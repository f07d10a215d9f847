import { describe, expect, it } from 'vitest';
import type { Entry } from '../../core/entry';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import type { VerifyReport } from '../../store/verify';
import { adjustDocumentFrequencies } from '../../store/terms';
import { runMemgate } from '../support/cli';
import { interleaveOnce } from '../support/faults';
import { untilHotEmbedded, untilWritesEmbedded } from '../support/embedded';
import { useTestEnv } from '../support/env';

/**
 * `memgate verify` passes on a store the lifecycle left (spills, evictions with stand-ins,
 * an erasure), and names the ids when a promise is broken — each broken here by hand, the
 * way a bug or a crash would leave it.
 */
const T0 = Date.UTC(2025, 7, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

const env = useTestEnv({ MEMGATE_HOT_CAPACITY: '6', MEMGATE_LOW_WATERMARK: '0.5' });

/** An agent whose lifecycle ran: a summary, spills to cold, evictions behind it, one erasure. */
async function livedIn(name: string): Promise<{ agentId: string; ids: string[] }> {
  const agentId = env.agent(name);
  const { entries } = await env.client.write({
    agentId,
    entries: [
      { text: 'Courier pickups leave from dock 7 at 16:00.', salience: 0.2, writtenAt: dayAt(0, 9) },
      { text: 'Courier pickups leave from dock 7 at 16:00!', salience: 0.2, writtenAt: dayAt(0, 10) },
      { text: 'The lab door code is 4471.', salience: 0.9, writtenAt: dayAt(0, 11) },
    ],
  });
  await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
  const more = await env.client.write({
    agentId,
    entries: ['boiler serviced', 'taxes filed', 'banners ordered', 'notice approved', 'interns start'].map(
      (t, i) => ({ text: `Office note: ${t}.`, salience: 0.9, writtenAt: dayAt(9, 10) + i }),
    ),
  });
  await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
  await env.client.forget({ agentId, entryId: entries[2]!.id });
  return { agentId, ids: [...entries, ...more.entries].map((e) => e.id) };
}

async function verifyCli(agentId: string): Promise<{ code: number; report: VerifyReport }> {
  const run = await runMemgate(env, ['verify', '--agent', agentId, '--json']);
  return { code: run.code, report: JSON.parse(run.stdout) as VerifyReport };
}

/** `entry` is inserted once verify has looked for its id: right before it reads the tombstones. */
function insertOnceLooked(entry: Entry): () => void {
  return interleaveOnce(
    env.store,
    'tombstones',
    'find',
    async () => {
      await env.store.hot.insertOne(entry);
    },
    (args) => !('_id' in (args[0] as object)),
  );
}

describe('memgate verify', () => {
  it('passes on a store the lifecycle left, and exits 0', async () => {
    const { agentId, ids } = await livedIn('verify-ok');
    // The lifecycle did what the checks look at.
    expect(await env.store.tombstones.countDocuments({ agentId, reason: 'erased' })).toBe(1);
    expect(
      await env.store.tombstones.countDocuments({ agentId, standIn: { $exists: true } }),
    ).toBeGreaterThan(0);
    expect(await env.store.cold.countDocuments({ agentId })).toBeGreaterThan(0);
    const { code, report } = await verifyCli(agentId);
    expect(report.findings).toEqual([]);
    expect(report).toMatchObject({ ok: true, agents: 1 });
    expect(report.checked.ids).toBeGreaterThanOrEqual(ids.length);
    expect(code).toBe(0);
    const text = await runMemgate(env, ['verify', '--agent', agentId]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^ok: 1 agent/);
  }, 300_000);

  it('names an entry that vanished, one in both tiers, and one back from behind a tombstone; exits 1', async () => {
    const { agentId } = await livedIn('verify-broken');
    // Embedded first, by the agent's workflow too: its embedding of the first write's ids
    // (the erased one among them) would meet the erased entry put back below, and embed it.
    await untilHotEmbedded(env.store, agentId);
    await untilWritesEmbedded(env.client.temporal, agentId);
    // Two of the office notes, which no night summarised or superseded: what happens to them
    // is only what this test does (the store's order of the rest varies with its updates).
    const notes = (await env.store.hot.find({ agentId, kind: { $ne: 'summary' } }).toArray())
      .filter((e) => e.text.startsWith('Office note'))
      .sort((a, b) => a._id.localeCompare(b._id));
    const [vanished, doubled] = notes as [Entry, Entry];
    await env.store.hot.deleteOne({ _id: vanished._id });
    await env.store.cold.insertOne(doubled);
    const erased = (await env.store.tombstones.findOne({ agentId, reason: 'erased' }))!;
    // Awaiting no work: embedded again, it would be named for its vector as well.
    const { pending: _pending, ...settled } = doubled;
    await env.store.cold.insertOne({ ...settled, _id: erased._id, text: 'The lab door code is 4471.' });

    const { code, report } = await verifyCli(agentId);
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    expect(report.findings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ check: 'unaccounted', id: vanished._id }),
        expect.objectContaining({ check: 'in-both-tiers', id: doubled._id }),
        expect.objectContaining({ check: 'resurrected', id: erased._id }),
      ]),
    );
    expect(report.findings.map((f) => f.check).sort()).toEqual([
      'in-both-tiers',
      'resurrected',
      'unaccounted',
    ]);
    const text = await runMemgate(env, ['verify', '--agent', agentId]);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(vanished._id);
  }, 300_000);

  it('names erased content left in a summary or the query log, and a stand-in that no longer stands', async () => {
    const { agentId } = await livedIn('verify-stand-ins');
    const erased = (await env.store.tombstones.findOne({ agentId, reason: 'erased' }))!;
    const evicted = (await env.store.tombstones.findOne({ agentId, standIn: { $exists: true } }))!;
    const summaryId = evicted.standIn!.summaryId;
    const tier = (await env.store.hot.countDocuments({ _id: summaryId })) ? env.store.hot : env.store.cold;
    const summary = (await tier.findOne({ _id: summaryId }))!;
    // A summary still built from the erased entry, and a logged recall that returned it.
    await env.store.hot.insertOne({ ...summary, _id: 'leftover-summary', derivedFrom: [erased._id] });
    await env.client.recall({ agentId, query: 'courier pickups dock' });
    await env.store.queries.updateOne({ agentId }, { $set: { hitIds: [erased._id] } });
    // The stand-in claims to be lossless but lost an atom, and then is superseded.
    await env.store.tombstones.updateOne(
      { _id: evicted._id },
      {
        $set: {
          standIn: { summaryId: summary._id, lossy: false },
          atoms: [...(evicted.atoms ?? []), 'num:99'],
        },
      },
    );
    await tier.updateOne({ _id: summary._id }, { $set: { isActive: false } });

    const { report } = await verifyCli(agentId);
    // Every entry the summary stood in for is named (both near-duplicates were evicted).
    const stoodIn = await env.store.tombstones.find({ agentId, 'standIn.summaryId': summaryId }).toArray();
    expect(stoodIn.length).toBeGreaterThan(0);
    const checks = report.findings.map((f) => `${f.check} ${f.id}`).sort();
    expect(checks).toEqual(
      [
        `erased-content ${erased._id}`,
        `erased-content ${erased._id}`,
        ...stoodIn.map((t) => `stand-in-inactive ${t._id}`),
        `stand-in-not-lossless ${evicted._id}`,
      ].sort(),
    );
    // And when the stand-in is gone altogether.
    await tier.deleteOne({ _id: summary._id });
    const gone = await env.client.verify({ agentId });
    expect(gone.findings.map((f) => f.check)).toContain('stand-in-missing');
  }, 300_000);

  it('names a term counted for more entries than hold it, though a write awaiting its count holds it', async () => {
    const { agentId } = await livedIn('verify-overcounted');
    // Counted once too often (an erased entry's count never taken back), then written again
    // by an entry that no night has counted yet.
    await adjustDocumentFrequencies(env.store, agentId, [['zeppelin']], 1);
    await env.client.write({
      agentId,
      entries: [{ text: 'A zeppelin passed over the dock.', salience: 0.9 }],
    });
    const { report } = await verifyCli(agentId);
    expect(report.findings).toEqual([
      expect.objectContaining({
        check: 'term-overcounted',
        detail: 'counted for 1 entries, held by 0 stored entries',
      }),
    ]);
  }, 300_000);

  it("names an erased entry's vector left in the store", async () => {
    const { agentId } = await livedIn('verify-vector');
    const erased = (await env.store.tombstones.findOne({ agentId, reason: 'erased' }))!;
    expect((await env.client.verify({ agentId })).findings).toEqual([]);
    // What a forget stopped between its delete and its drop of the vector would leave.
    const kept = (await env.store.vectors.findOne({ agentId, vector: { $exists: true } }))!;
    await env.store.vectors.updateOne({ _id: erased._id }, { $set: { vector: kept.vector! } });
    expect((await env.client.verify({ agentId })).findings).toEqual([
      expect.objectContaining({ check: 'erased-content', id: erased._id }),
    ]);
  }, 300_000);

  it('names nothing that a write under way completes while it reads', async () => {
    const { agentId } = await livedIn('verify-in-flight');
    const { entries } = await env.client.write({
      agentId,
      entries: [{ text: 'The courier now leaves at 17:00.', salience: 0.9 }],
    });
    const id = entries[0]!.id;
    // Registered and not yet inserted, as the write path leaves it for a moment; the insert
    // lands once verify has looked for it.
    const written = (await env.store.hot.findOne({ _id: id }))!;
    await env.store.hot.deleteOne({ _id: id });
    const undo = insertOnceLooked(written);
    try {
      expect((await env.client.verify({ agentId })).findings).toEqual([]);
    } finally {
      undo();
    }
    // A count that stays wrong is named though the first reading met a write under way.
    await adjustDocumentFrequencies(env.store, agentId, [['zeppelin']], 1);
    await env.store.hot.deleteOne({ _id: id });
    const again = insertOnceLooked(written);
    try {
      expect((await env.client.verify({ agentId })).findings).toEqual([
        expect.objectContaining({ check: 'term-overcounted' }),
      ]);
    } finally {
      again();
    }
    // What stays wrong is named: the same state, the insert never landing.
    await env.store.hot.deleteOne({ _id: id });
    expect((await env.client.verify({ agentId })).findings).toEqual([
      expect.objectContaining({ check: 'unaccounted', id }),
    ]);
  }, 300_000);

  it('refuses an agent id that is not one', async () => {
    const run = await runMemgate(env, ['verify', '--agent', '{"$ne":null}']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('agentId');
  }, 120_000);
});
