import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Entry } from '../../core/entry';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { seededRandom } from '../../core/seededRandom';
import { terms } from '../../core/text';
import type { QueryLogRecord } from '../../store/db';
import { logQuery, relogHits } from '../../store/entries';
import { beginErasure, deleteEntry, endErasure } from '../../store/erasure';
import { eraseFromQueryLog, tombstoneErasure } from '../../store/forget';
import { termKey } from '../../store/terms';
import { useTestEnv } from '../support/env';
import { interleaveOnce } from '../support/faults';
import { expectVerified } from '../support/verify';

/**
 * Erasure wins over what runs beside it (docs/invariants.md, Erasure wins): other erasures of
 * the same summary's sources, a night counting terms, a recall about to log what it read.
 * Whatever the interleaving, `memgate verify` is clean after and the erased content is nowhere.
 */
// Within the query log's retention of now: recall's `asOf` may not be older.
const T0 = Math.floor(Date.now() / DAY_MS - 10) * DAY_MS;
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

const env = useTestEnv();

/** Everything the agent has stored anywhere (document frequencies too), as one string. */
async function everything(agentId: string): Promise<string> {
  const s = env.store;
  return JSON.stringify(
    await Promise.all(
      [s.hot, s.cold, s.tombstones, s.queries, s.ledger, s.runs, s.termStats].map((c) =>
        (c as typeof s.hot).find({ agentId }).toArray(),
      ),
    ),
  );
}

const LOCKERS = ['amber', 'cobalt', 'saffron', 'viridian', 'magenta'];

/**
 * Near-duplicates, one locker colour each, merged into one summary by a night and counted by a
 * second (so the summary's own terms are in the document frequencies too).
 */
async function summarisedSources(name: string, n: number) {
  const agentId = env.agent(name);
  const { entries } = await env.client.write({
    agentId,
    entries: LOCKERS.slice(0, n).map((colour, i) => ({
      text: `Visitors sign in at the north reception desk before the morning briefing, locker ${colour}.`,
      salience: 0.9,
      writtenAt: dayAt(0, 9 + i),
    })),
  });
  const sources = entries.map((e, i) => ({ id: e.id, colour: LOCKERS[i]! }));
  await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
  await env.client.consolidate({ agentId, asOf: dayAt(2, 3) });
  const summary = (await env.store.hot.findOne({ agentId, kind: 'summary' }))!;
  expect(summary.derivedFrom).toEqual(sources.map((s) => s.id));
  await env.client.recall({ agentId, query: 'north reception locker', asOf: dayAt(2, 9) });
  return { agentId, sources, summaryId: summary._id };
}

/** The erased colours are nowhere; what was kept is stored, and a summary left is built from it alone. */
async function expectErased(
  agentId: string,
  summaryId: string,
  erased: { id: string; colour: string }[],
  kept: { id: string; colour: string }[],
): Promise<void> {
  await expectVerified(env, agentId);
  const stored = await everything(agentId);
  for (const { id, colour } of erased) {
    expect(stored, colour).not.toContain(colour);
    expect(await env.store.hot.countDocuments({ _id: id })).toBe(0);
    expect(await env.store.tombstones.findOne({ _id: id })).toMatchObject({ reason: 'erased', terms: [] });
  }
  for (const { id } of kept) expect(await env.store.hot.countDocuments({ _id: id })).toBe(1);
  const summary = await env.store.hot.findOne({ _id: summaryId });
  if (summary) expect(summary.derivedFrom).toEqual(kept.map((k) => k.id));
  const { hits } = await env.client.recall({ agentId, query: 'north reception locker', asOf: dayAt(2, 12) });
  for (const { colour } of erased) for (const hit of hits) expect(hit.text).not.toContain(colour);
}

/**
 * A recall of the secret, run in this process on the client's store, whose query-log record
 * waits for `step` when it holds the secret: a race between the recall's reads and its log.
 */
async function recallLoggingAfter(
  agentId: string,
  secret: string,
  step: () => Promise<unknown>,
): Promise<void> {
  const store = env.store as { queries: typeof env.store.queries };
  const queries = store.queries;
  store.queries = new Proxy(queries, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (prop !== 'insertOne') return bound;
      return async (...args: unknown[]) => {
        if ((args[0] as QueryLogRecord).hitIds.includes(secret)) await step();
        return bound(...args);
      };
    },
  });
  try {
    const { hits } = await env.client.recall({ agentId, query: 'vault combination' });
    expect(hits.map((h) => h.id)).toContain(secret);
  } finally {
    store.queries = queries;
  }
}

describe('forgets racing over the sources of one summary', () => {
  it('a second forget landing inside the first one’s rebuild of the summary', async () => {
    const { agentId, sources, summaryId } = await summarisedSources('race-two-forgets', 3);
    const [first, second, third] = sources as [(typeof sources)[0], (typeof sources)[0], (typeof sources)[0]];
    // Right before the first forget writes the summary's new text, the second runs to its end.
    const undo = interleaveOnce(
      env.worker.store,
      'hot',
      'updateOne',
      async () => {
        await env.client.forget({ agentId, entryId: second.id });
      },
      (args) =>
        (args[0] as { _id: string })._id === summaryId &&
        (args[1] as { $set?: Partial<Entry> }).$set?.text !== undefined,
    );
    try {
      await env.client.forget({ agentId, entryId: first.id });
    } finally {
      undo();
    }
    await expectErased(agentId, summaryId, [first, second], [third]);
  }, 300_000);

  it('several at once, whichever sources and however many (seeded)', async () => {
    for (let seed = 1; seed <= 4; seed++) {
      const random = seededRandom(seed);
      const { agentId, sources, summaryId } = await summarisedSources(`race-forgets-${seed}`, 5);
      const shuffled = [...sources].sort(() => random() - 0.5);
      const erased = shuffled.slice(0, 2 + Math.floor(random() * 4));
      await Promise.all(erased.map(({ id }) => env.client.forget({ agentId, entryId: id })));
      await expectErased(
        agentId,
        summaryId,
        erased,
        sources.filter((s) => !erased.includes(s)),
      );
    }
  }, 900_000);
});

describe('forget racing a night and a recall', () => {
  const SECRET = 'The vault combination is 31-41-59.';
  const OTHERS = ['The boiler was serviced.', 'Quarterly taxes are filed.'];

  it('between the night reading entries to count their terms and counting them', async () => {
    const agentId = env.agent('race-term-count');
    const { entries } = await env.client.write({
      agentId,
      entries: [SECRET, ...OTHERS].map((text, i) => ({ text, salience: 0.9, writtenAt: dayAt(0, 9 + i) })),
    });
    const secret = entries[0]!.id;
    const undo = interleaveOnce(
      env.worker.store,
      'hot',
      'bulkWrite',
      async () => {
        await env.client.forget({ agentId, entryId: secret });
      },
      (args) =>
        (args[0] as { updateOne?: { filter: { _id: string; pending?: string } } }[]).some(
          (op) => op.updateOne?.filter._id === secret && op.updateOne.filter.pending === 'terms',
        ),
    );
    try {
      await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    } finally {
      undo();
    }
    await expectVerified(env, agentId);
    const counted = (await env.store.termStats.find({ agentId }).toArray()).map((t) => t._id);
    const secretOnly = terms(SECRET).filter((t) => !OTHERS.some((o) => terms(o).includes(t)));
    for (const t of secretOnly) expect(counted).not.toContain(termKey(agentId, t));
    expect(counted).toContain(termKey(agentId, 'boiler'));
  }, 300_000);

  it('between a recall reading the entry and logging the query', async () => {
    const agentId = env.agent('race-query-log');
    const { entries } = await env.client.write({
      agentId,
      entries: [SECRET, ...OTHERS].map((text) => ({ text, salience: 0.9 })),
    });
    const secret = entries[0]!.id;
    await recallLoggingAfter(agentId, secret, () => env.client.forget({ agentId, entryId: secret }));
    expect(await env.store.queries.countDocuments({ agentId, hitIds: secret })).toBe(0);
    await expectVerified(env, agentId);
  }, 300_000);

  it('an erasure under way when a recall logs, though its clean-up of the query log is done', async () => {
    const agentId = env.agent('race-under-way');
    const { entries } = await env.client.write({
      agentId,
      entries: [SECRET, ...OTHERS].map((text) => ({ text, salience: 0.9 })),
    });
    const secret = entries[0]!.id;
    const at = Date.now();
    // Between the recall's reads and its record: an erasure that has removed the entry and
    // cleaned the query log, and has not ended (its summaries are still being worded).
    await recallLoggingAfter(agentId, secret, async () => {
      await beginErasure(env.store, agentId, secret);
      await tombstoneErasure(env.store, agentId, secret, at);
      await deleteEntry(env.store, agentId, secret);
      await eraseFromQueryLog(env.store, agentId, secret);
    });
    expect(await env.store.queries.countDocuments({ agentId, hitIds: secret })).toBe(0);
    await endErasure(env.store, agentId, secret);
  }, 300_000);

  it('with no erasure under way or ended since it began, a recall logs without a look at its hits', async () => {
    const agentId = env.agent('quiet-log');
    await env.client.write({
      agentId,
      entries: [SECRET, ...OTHERS].map((text) => ({ text, salience: 0.9 })),
    });
    const store = env.store as { tombstones: typeof env.store.tombstones };
    const tombstones = store.tombstones;
    let looked = 0;
    store.tombstones = new Proxy(tombstones, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        if (prop === 'findOne') looked++;
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
    try {
      const { hits } = await env.client.recall({ agentId, query: 'vault combination boiler' });
      expect(hits.length).toBeGreaterThan(1);
    } finally {
      store.tombstones = tombstones;
    }
    expect(looked).toBe(0);
    expect(await env.store.queries.countDocuments({ agentId })).toBe(1);
  }, 300_000);

  it('between a hybrid recall logging the hits it expected and setting the ones it found', async () => {
    const agentId = env.agent('race-relog');
    const { entries } = await env.client.write({
      agentId,
      entries: [SECRET, ...OTHERS].map((text) => ({ text, salience: 0.9 })),
    });
    const [secret, other] = [entries[0]!.id, entries[1]!.id];
    // Logged while the neighbours were read, without the entry: the erasure's clean-up of the
    // query log finds no record of it, and the record then gains it.
    const record = { _id: randomUUID(), agentId };
    await logQuery(env.store, {
      ...record,
      query: 'vault combination',
      terms: terms('vault combination'),
      at: Date.now(),
      deep: false,
      k: 10,
      hitIds: [other],
      meaningIds: [],
    });
    await env.client.forget({ agentId, entryId: secret });
    await relogHits(env.store, record, { hitIds: [secret, other], meaningIds: [secret] }, [secret]);
    expect(await env.store.queries.countDocuments({ agentId, hitIds: secret })).toBe(0);
    await expectVerified(env, agentId);
  }, 300_000);
});
