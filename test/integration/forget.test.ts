import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../core/errors';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { runMemgate } from '../support/cli';
import { useTestEnv } from '../support/env';
import { expectCensusKept } from '../support/census';
import { interleaveOnce } from '../support/faults';
import { expectVerified } from '../support/verify';

const T0 = Date.UTC(2025, 4, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

const env = useTestEnv({ MEMGATE_HOT_CAPACITY: '10', MEMGATE_LOW_WATERMARK: '0.8' });

/** Everything the agent has stored anywhere, as one string to search for erased content. */
async function everything(agentId: string): Promise<string> {
  const s = env.store;
  return JSON.stringify(
    await Promise.all([
      s.hot.find({ agentId }).toArray(),
      s.cold.find({ agentId }).toArray(),
      s.tombstones.find({ agentId }).toArray(),
      s.queries.find({ agentId }).toArray(),
      s.ledger.find({ agentId }).toArray(),
      s.runs.find({ agentId }).toArray(),
    ]),
  );
}

describe('forget (docs/invariants.md, Erasure wins)', () => {
  it('erases an entry from hot, the query log and the summary derived from it, which is rebuilt without it', async () => {
    const agentId = env.agent('forget');
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { text: 'Visitors sign in at the north reception desk.', salience: 0.8, writtenAt: dayAt(0, 9) },
        {
          text: 'Visitors sign in at the north reception desk. The lab door code is 4471.',
          salience: 0.8,
          writtenAt: dayAt(0, 10),
        },
        {
          text: 'Visitors sign in at the north reception desk before nine.',
          salience: 0.8,
          writtenAt: dayAt(0, 11),
        },
      ],
    });
    const [a, secret, c] = entries.map((e) => e.id) as [string, string, string];
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    const summary = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
    expect(summary.derivedFrom).toEqual([a, secret, c]);
    expect(summary.text).toContain('4471');
    await env.client.recall({ agentId, query: 'lab door code', asOf: dayAt(1, 9) });
    await env.client.recall({ agentId, query: 'north reception', asOf: dayAt(1, 9) });

    const result = await env.client.forget({ agentId, entryId: secret });
    expect(result).toMatchObject({
      resummarised: [summary._id],
      removed: [],
      tiers: ['hot'],
      queriesRemoved: 2,
    });

    const rebuilt = (await env.store.hot.findOne({ _id: summary._id }))!;
    expect(rebuilt.derivedFrom).toEqual([a, c]);
    expect(rebuilt.lossy_summary).toBe(false);
    expect(rebuilt.text).toContain('north reception desk');
    expect(await env.store.tombstones.findOne({ _id: secret })).toMatchObject({
      terms: [],
      reason: 'erased',
    });
    expect(await everything(agentId)).not.toMatch(/4471|lab door/);
    const deep = await env.client.recall({
      agentId,
      query: 'lab door code 4471',
      deep: true,
      asOf: dayAt(1, 10),
    });
    expect(deep.hits.map((h) => h.id)).not.toContain(secret);
    expect(deep.missing).toEqual([]);

    // A second erasure of the same entry finishes quietly; an unknown one is NotFound.
    await expect(env.client.forget({ agentId, entryId: secret })).resolves.toMatchObject({ tiers: [] });
    await expect(env.client.forget({ agentId, entryId: 'never-written' })).rejects.toBeInstanceOf(
      NotFoundError,
    );
    await expectVerified(env, agentId);
    await expectCensusKept(env.store, agentId);
  }, 300_000);

  it('removes and flags a summary that cannot be rebuilt because a co-source was evicted', async () => {
    const agentId = env.agent('forget-evicted');
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { text: 'Courier pickups leave from dock 7 at 16:00.', salience: 0.2, writtenAt: dayAt(0, 9) },
        { text: 'Courier pickups leave from dock 7 at 16:00!', salience: 0.2, writtenAt: dayAt(0, 10) },
      ],
    });
    const [first, second] = entries.map((e) => e.id) as [string, string];
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    const summaryId = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!._id;
    await env.client.write({
      agentId,
      entries: [
        'The boiler was serviced.',
        'Quarterly taxes are filed.',
        'Marketing wants new banners.',
        'Legal approved the privacy notice.',
        'Interns start on Monday.',
        'Solar panels need cleaning.',
        'Budget review slipped a week.',
        'Gym membership discount renewed.',
        'Fleet vans got winter tyres.',
        'Archive boxes moved offsite.',
      ].map((text, i) => ({ text, salience: 0.9, writtenAt: dayAt(9, 10) + i })),
    });
    const pressured = await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
    expect(pressured.counts.evicted).toBe(2);
    // A logged recall that returned the summary but not the erased source: the summary's removal
    // takes the record out of the log.
    const recalled = await env.client.recall({
      agentId,
      query: 'courier pickups dock',
      deep: true,
      asOf: dayAt(10, 9),
    });
    const hitIds = recalled.hits.map((h) => h.id);
    expect(hitIds).toContain(summaryId);
    expect(hitIds).not.toContain(first);

    // `first` exists only as a tombstone now; forgetting it still clears what is left of it.
    const result = await env.client.forget({ agentId, entryId: first });
    expect(result).toMatchObject({ resummarised: [], removed: [summaryId], tiers: [], queriesRemoved: 1 });
    expect(await env.store.tombstones.findOne({ _id: first })).toMatchObject({ terms: [], reason: 'erased' });
    expect(await env.store.tombstones.findOne({ _id: summaryId })).toMatchObject({
      terms: [],
      reason: `erased: derived from erased entry ${first}`,
    });
    // The co-source's tombstone says its stand-in is gone.
    expect(await env.store.tombstones.findOne({ _id: second })).toMatchObject({
      standIn: { summaryId, erased: true, lossy: true },
    });
    expect(
      (await env.store.hot.countDocuments({ _id: summaryId })) +
        (await env.store.cold.countDocuments({ _id: summaryId })),
    ).toBe(0);
    await expectVerified(env, agentId);
    await expectCensusKept(env.store, agentId);
  }, 300_000);
});

describe('the lifecycle CLI', () => {
  const memgate = (...args: string[]) => runMemgate(env, args);

  /** Two facts of one subject and attribute, the older (its id returned) superseded at night 2. */
  async function hqMoved(agentId: string): Promise<string> {
    const fact = { kind: 'fact' as const, subject: 'hq', attribute: 'city' };
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { ...fact, text: 'HQ is in Lyon.', writtenAt: dayAt(0, 9) },
        { ...fact, text: 'HQ moved to Porto.', writtenAt: dayAt(1, 9) },
      ],
    });
    return entries[0]!.id;
  }

  it('consolidates, restores and forgets, with typed errors and exit codes', async () => {
    const agentId = env.agent('cli-lifecycle');
    const lyon = await hqMoved(agentId);
    const run = await memgate(
      'consolidate',
      '--agent',
      agentId,
      '--as-of',
      new Date(dayAt(2, 3)).toISOString(),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ agentId, asOf: dayAt(2, 3), counts: { superseded: 1 } });

    const restored = await memgate('restore', lyon, '--agent', agentId);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout)).toEqual({ id: lyon, tier: 'hot', restored: ['supersession'] });
    const again = await memgate('restore', lyon, '--agent', agentId);
    expect(again.code, again.stderr).toBe(1);
    expect(again.stderr).toContain('[Conflict]');

    const forgotten = await memgate('forget', lyon, '--agent', agentId);
    expect(forgotten.code, forgotten.stderr).toBe(0);
    expect(JSON.parse(forgotten.stdout)).toMatchObject({ entryId: lyon, tiers: ['hot'] });
    const missing = await memgate('forget', 'nope', '--agent', agentId);
    expect(missing.code, missing.stderr).toBe(1);
    expect(missing.stderr).toContain('[NotFound]');
    const bad = await memgate('consolidate', '--agent', agentId, '--as-of', 'yesterday');
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toContain('[InvalidInput]');
  }, 300_000);

  it('counts what it deleted, when a restore of the entry lands between its read and its delete', async () => {
    const agentId = env.agent('forget-restored-meanwhile');
    const lyon = await hqMoved(agentId);
    await env.client.consolidate({ agentId, asOf: dayAt(2, 3) });
    expect(await env.store.hot.findOne({ _id: lyon })).toMatchObject({ isActive: false });
    // Right before the delete from hot, whichever command it is: an operator restores it.
    let restored = false;
    const restore = async () => {
      if (restored) return;
      restored = true;
      await env.client.restore({ agentId, entryId: lyon });
    };
    const deleting = (args: unknown[]) => (args[0] as { _id?: string })._id === lyon;
    const undo = [
      interleaveOnce(env.worker.store, 'hot', 'deleteOne', restore, deleting),
      interleaveOnce(env.worker.store, 'hot', 'findOneAndDelete', restore, deleting),
    ];
    try {
      await env.client.forget({ agentId, entryId: lyon });
    } finally {
      for (const u of undo) u();
    }
    expect(restored).toBe(true);
    await expectCensusKept(env.store, agentId);
  }, 300_000);
});
