import { describe, expect, it } from 'vitest';
import type { Entry } from '../../core/entry';
import type { Store } from '../../store/db';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { failOnce, interleaveOnce } from '../support/faults';
import { useTestEnv } from '../support/env';
import { exportChunks, importExport } from '../../store/portable';
import { expectVerified } from '../support/verify';
import { expectCensusKept } from '../support/census';

/**
 * Erasure wins over a nightly run of the same agent under way (docs/invariants.md, Erasure wins):
 * `forget` lands between a phase's read of an entry and its write of a copy (a spill to cold,
 * a rehydration to hot, a summary built from it). Whatever the interleaving, the erased
 * content is nowhere after.
 */
const T0 = Date.UTC(2025, 5, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

const env = useTestEnv({ MEMGATE_HOT_CAPACITY: '4', MEMGATE_LOW_WATERMARK: '0.5' });

const SECRET = 'The vault combination is 31-41-59.';

/** Everything the agent has stored anywhere, as one string to search for erased content. */
async function everything(agentId: string): Promise<string> {
  const s = env.store;
  return JSON.stringify(
    await Promise.all(
      [s.hot, s.cold, s.tombstones, s.queries, s.ledger, s.runs].map((c) =>
        (c as typeof s.hot).find({ agentId }).toArray(),
      ),
    ),
  );
}

async function expectErased(agentId: string, id: string): Promise<void> {
  await expectVerified(env, agentId);
  expect(await env.store.hot.countDocuments({ _id: id })).toBe(0);
  expect(await env.store.cold.countDocuments({ _id: id })).toBe(0);
  expect(await env.store.tombstones.findOne({ _id: id })).toMatchObject({ reason: 'erased', terms: [] });
  expect(await everything(agentId)).not.toMatch(/31-41-59|vault combination/);
  // Nothing points at a summary that is gone.
  for (const e of [
    ...(await env.store.hot.find({ agentId }).toArray()),
    ...(await env.store.cold.find({ agentId }).toArray()),
  ]) {
    for (const s of e.subsumedBy ?? []) {
      const standIn =
        (await env.store.hot.countDocuments({ _id: s.summaryId })) +
        (await env.store.cold.countDocuments({ _id: s.summaryId }));
      expect(standIn, `${e._id} subsumed by ${s.summaryId}`).toBe(1);
    }
  }
}

/** Every source is forgotten right before the night writes the summary it read them for. */
function forgetBeforeSummaryWrite(agentId: string, ids: string[]): () => void {
  return interleaveOnce(
    env.worker.store,
    'hot',
    'insertMany',
    async () => {
      for (const entryId of ids) await env.client.forget({ agentId, entryId });
    },
    (args) => (args[0] as Entry[]).some((d) => d.kind === 'summary'),
  );
}

/** Matches an insert that writes the entry `id`. */
const insertOf = (id: string) => (args: unknown[]) => (args[0] as Entry[]).some((d) => d._id === id);

/** The secret is forgotten right before `store` next inserts it into hot. */
function forgetBeforeInsert(store: Store, agentId: string, secret: string): () => void {
  return interleaveOnce(
    store,
    'hot',
    'insertMany',
    async () => {
      await env.client.forget({ agentId, entryId: secret });
    },
    insertOf(secret),
  );
}

/** The secret first (the oldest write, so reclaim spills it first), then five more. */
async function agentWithSecret(name: string): Promise<{ agentId: string; secret: string }> {
  const agentId = env.agent(name);
  const { entries } = await env.client.write({
    agentId,
    entries: [
      { text: SECRET, salience: 0.9, writtenAt: dayAt(0, 8) },
      ...['boiler serviced', 'taxes filed', 'banners ordered', 'notice approved', 'interns start'].map(
        (t, i) => ({ text: `Office note: ${t}.`, salience: 0.9, writtenAt: dayAt(0, 9 + i) }),
      ),
    ],
  });
  return { agentId, secret: entries[0]!.id };
}

/** The secret is forgotten right before the night copies it to cold; `then`, after the forget. */
function forgetBeforeSpillCopy(
  agentId: string,
  secret: string,
  then: () => void = () => undefined,
): () => void {
  return interleaveOnce(
    env.worker.store,
    'cold',
    'insertMany',
    async () => {
      await env.client.forget({ agentId, entryId: secret });
      then();
    },
    (args) => (args[0] as Entry[]).some((d) => d._id === secret),
  );
}

describe('forget during a nightly run of the same agent', () => {
  it('between reclaim reading an entry and copying it to cold', async () => {
    const { agentId, secret } = await agentWithSecret('race-spill');
    const undo = forgetBeforeSpillCopy(agentId, secret);
    try {
      const report = await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
      expect(report.counts.spilled).toBeGreaterThan(0);
    } finally {
      undo();
    }
    await expectErased(agentId, secret);
  }, 300_000);

  it('between reclaim reading an entry and copying it to cold, the look after the copy failing', async () => {
    const { agentId, secret } = await agentWithSecret('race-spill-look-fails');
    let lookFailed = false;
    let undoLook = () => undefined as void;
    const undo = forgetBeforeSpillCopy(agentId, secret, () => {
      // The copy lands; the look for an erasure after it never answers (the worker dies, or
      // the store times out), and the phase is retried.
      undoLook = failOnce(
        env.worker.store,
        'tombstones',
        'find',
        async () => {
          lookFailed = true;
        },
        (args) => (args[0] as { _id?: { $in?: string[] } })._id?.$in?.includes(secret) === true,
      );
    });
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    } finally {
      undo();
      undoLook();
    }
    expect(lookFailed).toBe(true);
    await expectErased(agentId, secret);
  }, 300_000);

  it('between refresh reading a cold entry and copying it back to hot', async () => {
    const { agentId, secret } = await agentWithSecret('race-rehydrate');
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    expect(await env.store.cold.countDocuments({ _id: secret })).toBe(1);
    // The agent reads it back from cold: the next night brings it back to hot.
    const deep = await env.client.recall({
      agentId,
      query: 'vault combination',
      deep: true,
      asOf: dayAt(1, 12),
    });
    expect(deep.hits[0]!.id).toBe(secret);
    const undo = interleaveOnce(
      env.worker.store,
      'hot',
      'replaceOne',
      async () => {
        await env.client.forget({ agentId, entryId: secret });
      },
      (args) => (args[0] as { _id: string })._id === secret,
    );
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(2, 3) });
    } finally {
      undo();
    }
    await expectErased(agentId, secret);
  }, 300_000);

  it('between consolidation reading a cluster and writing its summary', async () => {
    const agentId = env.agent('race-summary');
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { text: 'The vault combination is 31-41-59, say the guards.', salience: 0.9, writtenAt: dayAt(0, 9) },
        {
          text: 'The vault combination is 31-41-59, say the guards!',
          salience: 0.9,
          writtenAt: dayAt(0, 10),
        },
        { text: 'Guards say the vault combination is 31-41-59.', salience: 0.9, writtenAt: dayAt(0, 11) },
      ],
    });
    const ids = entries.map((e) => e.id);
    const undo = forgetBeforeSummaryWrite(agentId, ids);
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    } finally {
      undo();
    }
    for (const id of ids) await expectErased(agentId, id);
    expect(await env.store.hot.countDocuments({ agentId, kind: 'summary' })).toBe(0);
  }, 300_000);

  it('between consolidation writing a summary of erased sources and removing it, a recall reads it', async () => {
    const agentId = env.agent('race-summary-recall');
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { text: 'The vault combination is 31-41-59, say the guards.', salience: 0.9, writtenAt: dayAt(0, 9) },
        { text: 'Guards say the vault combination is 31-41-59.', salience: 0.9, writtenAt: dayAt(0, 10) },
      ],
    });
    const ids = entries.map((e) => e.id);
    // The sources' erasures have ended when the summary is written, so only the summary's own
    // removal can take the recall's record out of the log.
    const undoForget = forgetBeforeSummaryWrite(agentId, ids);
    const recalled: string[] = [];
    const undoRecall = interleaveOnce(
      env.worker.store,
      'tombstones',
      'replaceOne',
      async () => {
        const { hits } = await env.client.recall({ agentId, query: 'vault combination', asOf: dayAt(1, 3) });
        recalled.push(...hits.map((h) => h.id));
      },
      (args) => !ids.includes((args[0] as { _id: string })._id),
    );
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    } finally {
      undoRecall();
      undoForget();
    }
    const [summary] = await env.store.tombstones.find({ agentId, _id: { $nin: ids } }).toArray();
    expect(summary?.reason).toMatch(/^erased: derived from erased entry/);
    expect(recalled).toContain(summary!._id);
    for (const id of ids) await expectErased(agentId, id);
  }, 300_000);
});

describe('a replayed write (same id) racing the entry it repeats', () => {
  const secretWrite = (agentId: string) => ({
    agentId,
    entries: [{ text: SECRET, salience: 0.9, writtenAt: dayAt(0, 8) }],
  });

  // The entry is in hot when the guard looks, so the replay goes on to insert it: the other
  // side runs right before that insert.
  it('past the replay guard while forget erases it: the entry stays erased', async () => {
    const { agentId, secret } = await agentWithSecret('replay-forget');
    const undo = forgetBeforeInsert(env.worker.store, agentId, secret);
    try {
      const replay = await env.client.write(secretWrite(agentId));
      expect(replay.entries).toEqual([{ id: secret, status: 'deleted' }]);
    } finally {
      undo();
    }
    await expectErased(agentId, secret);
  }, 300_000);

  it('past the replay guard while a night spills it: one copy, in cold', async () => {
    const { agentId, secret } = await agentWithSecret('replay-spill');
    const undo = interleaveOnce(
      env.worker.store,
      'hot',
      'insertMany',
      async () => {
        await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
      },
      insertOf(secret),
    );
    try {
      const replay = await env.client.write(secretWrite(agentId));
      expect(replay.entries).toEqual([{ id: secret, status: 'existing' }]);
    } finally {
      undo();
    }
    expect(await env.store.hot.countDocuments({ _id: secret })).toBe(0);
    expect(await env.store.cold.countDocuments({ _id: secret })).toBe(1);
    await expectVerified(env, agentId);
  }, 300_000);
});

describe('an import racing forget of an entry it holds', () => {
  it('of an export taken before the forget, the forget landing as it writes', async () => {
    const { agentId, secret } = await agentWithSecret('import-forget');
    let exported = '';
    for await (const chunk of exportChunks(env.store, agentId, Date.now())) exported += chunk;
    // Held when the import looks for an erasure, forgotten right before it writes its copy.
    const undo = forgetBeforeInsert(env.store, agentId, secret);
    try {
      const lines = exported.trimEnd().split('\n');
      await importExport(
        env.store,
        agentId,
        (async function* () {
          yield* lines;
        })(),
        Date.now(),
      );
    } finally {
      undo();
    }
    await expectErased(agentId, secret);
    // Counted in by the import, counted out by its withdrawal: the census holds.
    await expectCensusKept(env.store, agentId);
  }, 300_000);
});
