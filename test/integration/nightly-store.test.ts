import { randomUUID } from 'node:crypto';
import type { Collection } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { buildEntry, memoryPolicy, type Entry } from '../../core/entry';
import { reclaimPhase, refreshPhase, type NightPolicy } from '../../core/nightly/phases';
import { awaitsCounting, refreshPolicy } from '../../core/nightly/plans';
import { reclaimPolicy, type ReclaimStep } from '../../core/nightly/reclaim';
import { DAY_MS, dayOf, HOUR_MS } from '../../core/salience';
import { parseConfig } from '../../core/config';
import { countTerms } from '../../core/text';
import { ConflictError } from '../../core/errors';
import { storeLimitsOf } from '../../store/guard';
import { CALL_FAN_OUT, openStore, type QueryLogRecord, type Store } from '../../store/db';
import { entriesWithTerm, insertNewEntries, logQuery, settledEntry } from '../../store/entries';
import {
  eraseFromQueryLog,
  removeSummary,
  replaceSummaryContent,
  tombstoneErasure,
  unlinkSupersession,
} from '../../store/forget';
import { annotate } from '../../store/annotate';
import { beginErasure, deleteEntry, endErasure, withdrawErased } from '../../store/erasure';
import { mongoNight } from '../../store/nightStore';
import {
  evictEntry,
  expireEntry,
  rehydrateEntry,
  retireSummary,
  spillEntries,
  supersedeEntry,
} from '../../store/nightly';
import type { RunContext } from '../../store/ledger';
import { restoreEntry } from '../../store/restore';
import { failOnce, interleaveOnce, observed } from '../support/faults';
import { spillStep } from '../support/reclaimSteps';

const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
const T0 = Date.UTC(2025, 0, 1);
let store: Store;

beforeAll(async () => {
  store = await openStore(
    inject('mongoUri'),
    `test_store_${randomUUID().slice(0, 8)}`,
    storeLimitsOf(parseConfig({})),
  );
});
afterAll(async () => {
  await store?.db.dropDatabase();
  await store?.close();
});

function entry(agentId: string, id: string, text: string, extra: Partial<Entry> = {}): Entry {
  return {
    ...buildEntry(
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
    ),
    ...extra,
  };
}

/**
 * The collection with every `toArray` of its finds run through `around`, and every document
 * its finds' cursors yield when iterated passed to `iterated` (`limit` and the like return
 * the cursor again, so theirs are too): how a test sees the reads a phase makes.
 */
function withFindsRead(
  collection: Collection<Entry>,
  around: (toArray: () => Promise<Entry[]>) => Promise<Entry[]>,
  iterated: (doc: Entry) => void = () => undefined,
): Collection<Entry> {
  const observed = (cursor: object): object =>
    new Proxy(cursor, {
      get(c, key, r) {
        const member: unknown = Reflect.get(c, key, r);
        if (typeof member !== 'function') return member;
        const call = (member as (...args: unknown[]) => unknown).bind(c);
        if (key === 'toArray') return () => around(() => call() as Promise<Entry[]>);
        if (key === Symbol.asyncIterator)
          return async function* () {
            for await (const doc of call() as AsyncIterable<Entry>) {
              iterated(doc);
              yield doc;
            }
          };
        return (...args: unknown[]) => {
          const out = call(...args);
          return out === c ? observed(c) : out;
        };
      },
    });
  return new Proxy(collection, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const bound = (value as (...args: unknown[]) => unknown).bind(target);
      if (prop !== 'find') return bound;
      return (...args: unknown[]) => observed(bound(...args) as object);
    },
  });
}

/** The collection with the id of every entry its finds return, read whole or iterated, added to `read`. */
function withReadsSeen(collection: Collection<Entry>, read: Set<string>): Collection<Entry> {
  return withFindsRead(
    collection,
    async (toArray) => {
      const docs = await toArray();
      for (const d of docs) read.add(d._id);
      return docs;
    },
    (doc) => read.add(doc._id),
  );
}

async function tiersOf(agentId: string, id: string): Promise<string[]> {
  const out: string[] = [];
  if (await store.hot.findOne({ _id: id, agentId })) out.push('hot');
  if (await store.cold.findOne({ _id: id, agentId })) out.push('cold');
  return out;
}

const ctx = (agentId: string): RunContext => ({
  agentId,
  asOf: T0 + 10 * 24 * HOUR_MS,
  runId: `${agentId}:run`,
});

describe('tier moves on the real store', () => {
  it('spill is an idempotent hot → cold move that survives a crash between copy and delete', async () => {
    const a = `a-${randomUUID()}`;
    const batch = ['e1', 'e2', 'e3'].map((n) =>
      entry(a, `${a}/${n}`, `The notice period is ${n.length} days.`),
    );
    await insertNewEntries(store, batch);
    const spills = batch.map((e) => ({ step: spillStep(e._id), entry: e }));
    const seen: string[][] = [];
    const restore = failOnce(store, 'hot', 'deleteMany', async () => {
      for (const e of batch) seen.push(await tiersOf(a, e._id));
    });
    await expect(spillEntries(store, ctx(a), spills)).rejects.toThrow(/injected/);
    restore();
    expect(seen).toEqual([
      ['hot', 'cold'],
      ['hot', 'cold'],
      ['hot', 'cold'],
    ]);
    expect(await spillEntries(store, ctx(a), spills)).toBe(3);
    // A rerun over entries already moved finds them in cold and changes nothing.
    expect(await spillEntries(store, ctx(a), spills)).toBe(3);
    for (const e of batch) {
      expect(await tiersOf(a, e._id)).toEqual(['cold']);
      const cold = await store.cold.findOne({ _id: e._id, agentId: a });
      expect(cold).toMatchObject({
        text: e.text,
        salience: e.salience,
        source: e.source,
        spilledAt: ctx(a).asOf,
      });
    }
    expect(await store.ledger.countDocuments({ agentId: a, event: 'spill' })).toBe(3);
  });

  it('a spill deletes its batch from hot in one statement, each entry only at the version it read', async () => {
    const a = `a-${randomUUID()}`;
    const batch = Array.from({ length: 20 }, (_, i) =>
      entry(a, `${a}/e${i}`, `The courier calls on day ${i}.`),
    );
    await insertNewEntries(store, batch);
    // Delete statements sent to hot: each is a query and a transaction at the server.
    let deletes = 0;
    const hot = store.hot;
    store.hot = observed(hot, (method, args) => {
      if (method === 'deleteOne' || method === 'deleteMany') deletes++;
      if (method === 'bulkWrite') deletes += (args[0] as object[]).filter((op) => 'deleteOne' in op).length;
    });
    // Between the copy to cold and the delete, another writer changes e3 in hot.
    const changed = `${a}/e3`;
    const undo = interleaveOnce(store, 'hot', 'deleteMany', async () => {
      await hot.updateOne({ _id: changed }, { $set: { confidence: 0.9 }, $inc: { version: 1 } });
    });
    try {
      expect(
        await spillEntries(
          store,
          ctx(a),
          batch.map((e) => ({ step: spillStep(e._id), entry: e })),
        ),
      ).toBe(20);
    } finally {
      undo();
      store.hot = hot;
    }
    // One for the batch, and one for e3, moved again at its new version.
    expect(deletes).toBe(2);
    for (const e of batch) expect(await tiersOf(a, e._id)).toEqual(['cold']);
    expect(await store.cold.findOne({ _id: changed, agentId: a })).toMatchObject({ confidence: 0.9 });
  });

  it('rehydrate is an idempotent cold → hot move that survives a crash between copy and delete', async () => {
    const a = `a-${randomUUID()}`;
    await store.cold.insertOne(entry(a, `${a}/e1`, 'The notice period is 30 days.', { spilledAt: T0 }));
    const step = {
      id: `${a}/e1`,
      tier: 'cold' as const,
      salience: { base: 0.5, at: ctx(a).asOf },
      dormantAt: ctx(a).asOf + 1,
    };
    const restore = failOnce(store, 'cold', 'deleteOne');
    await expect(rehydrateEntry(store, ctx(a), step)).rejects.toThrow(/injected/);
    restore();
    expect(await tiersOf(a, `${a}/e1`)).toEqual(['hot', 'cold']);
    expect(await rehydrateEntry(store, ctx(a), step)).toBe('moved');
    expect(await tiersOf(a, `${a}/e1`)).toEqual(['hot']);
    const hot = (await store.hot.findOne({ _id: `${a}/e1`, agentId: a }))!;
    expect(hot.salience).toEqual(step.salience);
    expect(hot.refreshedAt).toBe(ctx(a).asOf);
    expect(hot.spilledAt).toBeUndefined();
  });

  it('eviction writes a content-free tombstone and the ledger record, then leaves both tiers', async () => {
    const a = `a-${randomUUID()}`;
    const e = entry(a, `${a}/e1`, 'The notice period is 30 days.');
    await insertNewEntries(store, [e]);
    await store.cold.insertOne(e);
    const step: ReclaimStep = {
      ...spillStep(`${a}/e1`),
      action: 'evict',
      why: 'dormant, window elapsed, subsumed by a lossless summary',
      standIn: { summaryId: `${a}/s1`, lossy: false },
    };
    const restore = failOnce(store, 'hot', 'findOneAndDelete');
    await expect(evictEntry(store, ctx(a), e, step)).rejects.toThrow(/injected/);
    restore();
    expect(await store.tombstones.findOne({ _id: `${a}/e1` })).toBeTruthy();
    await evictEntry(store, ctx(a), e, step);
    expect(await tiersOf(a, `${a}/e1`)).toEqual([]);
    const stone = (await store.tombstones.findOne({ _id: `${a}/e1` }))!;
    expect(stone).toMatchObject({
      agentId: a,
      terms: e.terms,
      standIn: { summaryId: `${a}/s1`, lossy: false },
    });
    expect(JSON.stringify(stone)).not.toContain('30 days');
    expect(await store.ledger.countDocuments({ agentId: a, event: 'evict' })).toBe(1);
  });
});

describe("the ledger's record of a change another writer turned away", () => {
  it('leaves with it: an expiry a renewal overtook, a rehydration a forget overtook', async () => {
    const a = `a-${randomUUID()}`;
    const [fact, spilled] = [`${a}/fact`, `${a}/spilled`];
    const stale = entry(a, fact, 'The gate code is 4411.', {
      validity: { volatile: true, freshUntil: ctx(a).asOf - 1 },
    });
    await insertNewEntries(store, [stale]);
    await store.cold.insertOne(entry(a, spilled, 'The notice period is 30 days.', { spilledAt: T0 }));
    // Renewed right before the expiry lands: the expiry declines.
    const renew = interleaveOnce(store, 'hot', 'updateOne', async () => {
      await store.hot.updateOne(
        { _id: fact },
        { $set: { 'validity.freshUntil': ctx(a).asOf + DAY_MS }, $inc: { version: 1 } },
      );
    });
    try {
      await expireEntry(store, ctx(a), stale);
    } finally {
      renew();
    }
    expect((await store.hot.findOne({ _id: fact }))!.expiredAt).toBeUndefined();
    // Erased right before the rehydration reads it: nothing is moved.
    const erase = interleaveOnce(store, 'cold', 'findOne', async () => {
      await store.cold.deleteOne({ _id: spilled });
    });
    try {
      await expect(
        rehydrateEntry(store, ctx(a), {
          id: spilled,
          tier: 'cold' as const,
          salience: { base: 0.5, at: ctx(a).asOf },
          dormantAt: ctx(a).asOf + 1,
        }),
      ).resolves.toBe('absent');
    } finally {
      erase();
    }
    expect(await store.ledger.find({ agentId: a }).toArray()).toEqual([]);
  });
});

describe('eviction after a rehydration cut off between its copy and its delete', () => {
  it('leaves neither tier: the cold copy, a version older than the hot one it evicts, goes too', async () => {
    const a = `a-${randomUUID()}`;
    const id = `${a}/e1`;
    await store.cold.insertOne(entry(a, id, 'The notice period is 30 days.', { spilledAt: T0 }));
    const restore = failOnce(store, 'cold', 'deleteOne');
    await expect(
      rehydrateEntry(store, ctx(a), {
        id,
        tier: 'cold' as const,
        salience: { base: 0.5, at: ctx(a).asOf },
        dormantAt: ctx(a).asOf + 1,
      }),
    ).rejects.toThrow(/injected/);
    restore();
    // No retry moved it again; a later night evicts the hot copy, the one reclaim reads.
    expect(await tiersOf(a, id)).toEqual(['hot', 'cold']);
    const hot = (await store.hot.findOne({ _id: id, agentId: a }))!;
    const step: ReclaimStep = { ...spillStep(id), action: 'evict', why: 'dormant, window elapsed, subsumed' };
    expect(await evictEntry(store, ctx(a), hot, step)).toBe(true);
    expect(await tiersOf(a, id)).toEqual([]);
  });
});

describe("the night's reads by term", () => {
  it('reads a few terms side by side and yields each term’s entries in the terms’ order', async () => {
    const a = `a-${randomUUID()}`;
    const words = [
      'amber',
      'basil',
      'cedar',
      'delta',
      'ember',
      'fjord',
      'grove',
      'heron',
      'indigo',
      'juniper',
    ];
    await insertNewEntries(
      store,
      words.flatMap((w, i) =>
        Array.from({ length: i + 1 }, (_, k) => entry(a, `${a}/${w}${k}`, `${w} note number ${k}`)),
      ),
    );
    const terms = [...new Set((await store.hot.find({ agentId: a }).toArray()).flatMap((e) => e.terms))]
      .filter((t) => words.some((w) => w.startsWith(t)))
      .sort();
    expect(terms).toHaveLength(words.length);
    const reads = { inFlight: 0, most: 0 };
    const hot = withFindsRead(store.hot, async (read) => {
      reads.most = Math.max(reads.most, ++reads.inFlight);
      try {
        return await read();
      } finally {
        reads.inFlight--;
      }
    });
    const night = mongoNight({ ...store, hot }, ctx(a), 500);
    const pages: string[][] = [];
    for await (const page of night.withTerms('hot', terms, 50)) pages.push(page.map((e) => e._id).sort());
    expect(reads.most).toBeGreaterThan(1);
    expect(reads.most).toBeLessThanOrEqual(CALL_FAN_OUT);
    const oneByOne: string[][] = [];
    for (const term of terms)
      oneByOne.push((await entriesWithTerm(store.hot, a, term, 50)).map((e) => e._id).sort());
    expect(pages).toEqual(oneByOne);
    expect(pages.map((p) => p.length)).toEqual(words.map((_, i) => i + 1));
  });
});

describe("the refresh's reads", () => {
  it('reads hot by the dormant days of its window, not by the postings of the queries’ terms', async () => {
    const a = `a-${randomUUID()}`;
    const { asOf } = ctx(a);
    const at = (id: string, text: string, dormantAt: number) =>
      settledEntry({ ...entry(a, `${a}/${id}`, text), dormantAt }, T0);
    // Live until long after the night: the query's term would read every one of them.
    const live = Array.from({ length: 120 }, (_, i) =>
      at(`live${i}`, 'The harbour crane', asOf + 5 * DAY_MS),
    );
    const inWindow = [1, 2, 3].map((i) => at(`window${i}`, 'The harbour pilot', asOf - i * DAY_MS));
    const pastWindow = [at('past', 'The harbour lamp', asOf - 9 * DAY_MS)];
    const unmatched = [at('meadow', 'A meadow orchid', asOf - DAY_MS / 2)];
    await store.hot.insertMany([...live, ...inWindow, ...pastWindow, ...unmatched]);
    await logQuery(store, {
      _id: randomUUID(),
      agentId: a,
      query: 'harbour',
      terms: ['harbour'],
      at: asOf - HOUR_MS,
      deep: false,
      k: 10,
      hitIds: [],
    });
    const read: string[] = [];
    const hot = withFindsRead(store.hot, async (toArray) => {
      const docs = await toArray();
      read.push(...docs.map((d) => d._id));
      return docs;
    });
    const config = parseConfig({});
    const nightPolicy: NightPolicy = {
      memory: policy,
      refresh: refreshPolicy(config),
      reclaim: reclaimPolicy(config),
      cluster: { similarity: config.clusterSimilarity, neighbours: config.clusterNeighbours },
      batch: 50,
      queryLogRetentionDays: config.queryLogRetentionDays,
    };
    const { refreshed } = await refreshPhase(mongoNight({ ...store, hot }, ctx(a), 50), ctx(a), nightPolicy);
    expect(refreshed).toBe(inWindow.length);
    expect(read.filter((id) => id.includes('/live'))).toEqual([]);
    const after = new Map((await store.hot.find({ agentId: a }).toArray()).map((e) => [e._id, e]));
    for (const e of inWindow) expect(after.get(e._id)).toMatchObject({ refreshedAt: asOf });
    // Gone dormant since the last night and not raised: out of default recall's postings.
    for (const e of [...pastWindow, ...unmatched]) {
      expect(after.get(e._id)?.refreshedAt).toBeUndefined();
      expect(after.get(e._id)?.liveKeys).toBeUndefined();
    }
    for (const e of live) expect(after.get(e._id)?.liveKeys).toEqual(e.liveKeys);
  });
});

describe("reclaim's reads", () => {
  const config = parseConfig({});
  // Capacity 100, down to 90: from a hot of 120, the 30 written longest ago leave.
  const nightPolicy: NightPolicy = {
    memory: policy,
    refresh: refreshPolicy(config),
    reclaim: reclaimPolicy({ ...config, hotCapacity: 100 }),
    cluster: { similarity: config.clusterSimilarity, neighbours: config.clusterNeighbours },
    batch: 50,
    queryLogRetentionDays: config.queryLogRetentionDays,
  };
  /** 20 entries written on each of days 0..5 after T0, an hour apart; one of day 0 refreshed on day 5. */
  function sixDays(a: string): Entry[] {
    return Array.from({ length: 120 }, (_, i) => {
      const day = Math.floor(i / 20);
      const writtenAt = T0 + day * DAY_MS + (i % 20) * HOUR_MS;
      const refreshedAt = i === 3 ? T0 + 5 * DAY_MS + HOUR_MS : undefined;
      return settledEntry(
        entry(a, `${a}/d${day}-${String(i % 20).padStart(2, '0')}`, `The ferry log ${i}`, {
          writtenAt,
          ...(refreshedAt !== undefined && { refreshedAt }),
        }),
        T0,
      );
    });
  }
  const oldestWriteFirst = (entries: readonly Entry[]) =>
    [...entries]
      .sort((x, y) => Math.max(x.writtenAt, x.refreshedAt ?? 0) - Math.max(y.writtenAt, y.refreshedAt ?? 0))
      .map((e) => e._id);

  /** Six days of entries, their count 10 too many and in doubt: an attempt stopped between a move and its count. */
  async function sixDaysCountInDoubt(a: string): Promise<void> {
    await store.hot.insertMany(sixDays(a));
    await store.agents.insertOne({
      _id: a,
      firstWriteAt: T0,
      hot: 130,
      cold: 0,
      hotWrittenFrom: dayOf(T0),
      hotCountInDoubt: true,
    });
  }

  /** One reclaim of the agent's store, and the ids of every hot entry it read. */
  async function reclaimSeen(a: string): Promise<{ read: Set<string>; moved: number }> {
    const read = new Set<string>();
    const hot = withReadsSeen(store.hot, read);
    const { spilled, evicted } = await reclaimPhase(
      mongoNight({ ...store, hot }, ctx(a), 50),
      ctx(a),
      nightPolicy,
    );
    return { read, moved: spilled + evicted };
  }

  it('reads hot from its oldest write day until those days hold what must leave, and moves the oldest written', async () => {
    const a = `a-${randomUUID()}`;
    const hotEntries = sixDays(a);
    await store.hot.insertMany(hotEntries);
    await store.agents.insertOne({ _id: a, firstWriteAt: T0, hot: 120, cold: 0, hotWrittenFrom: dayOf(T0) });
    const { read, moved } = await reclaimSeen(a);
    expect(moved).toBe(30);
    const left = new Set(
      (await store.hot.find({ agentId: a }, { projection: { _id: 1 } }).toArray()).map((e) => e._id),
    );
    expect(hotEntries.map((e) => e._id).filter((id) => !left.has(id))).toEqual(
      expect.arrayContaining(oldestWriteFirst(hotEntries).slice(0, 30)),
    );
    // Refreshed on day 5: a late write, so it stays.
    expect(left.has(hotEntries[3]!._id)).toBe(true);
    // Days 0 and 1 hold the 30 (day 0's 19 and 11 of day 1's 20): nothing written later is read.
    expect([...read].filter((id) => !/\/d[01]-/.test(id))).toEqual([]);
    // Day 0 still holds an entry, so the next night starts there again.
    expect((await store.agents.findOne({ _id: a }))?.hotWrittenFrom).toBe(dayOf(T0));
  });

  it('reads every hot entry of a store kept before write days, and keys each so that the next reclaim reads from the oldest day', async () => {
    const a = `a-${randomUUID()}`;
    const hotEntries = sixDays(a).map(({ lastWriteKey: _key, ...e }) => e);
    await store.hot.insertMany(hotEntries);
    await store.agents.insertOne({ _id: a, firstWriteAt: T0, hot: 120, cold: 0 });
    const { read } = await reclaimSeen(a);
    expect(read.size).toBe(120);
    const after = await store.hot.find({ agentId: a }).toArray();
    expect(after).toHaveLength(90);
    for (const e of after)
      expect(e.lastWriteKey).toBe(`${a} ${dayOf(Math.max(e.writtenAt, e.refreshedAt ?? 0))}`);
    expect((await store.agents.findOne({ _id: a }))?.hotWrittenFrom).toBe(dayOf(T0));
  });

  it('reads every hot entry again when a retried phase left the hot count in doubt, and sets it again', async () => {
    const a = `a-${randomUUID()}`;
    await sixDaysCountInDoubt(a);
    const { read, moved } = await reclaimSeen(a);
    expect(read.size).toBe(120);
    expect(moved).toBe(30);
    const record = await store.agents.findOne({ _id: a });
    expect(record?.hot).toBe(90);
    expect(record?.hotCountInDoubt).toBeUndefined();
  });

  it('leaves the hot count in doubt when an entry is deleted while reclaim reads every hot entry', async () => {
    const a = `a-${randomUUID()}`;
    await sixDaysCountInDoubt(a);
    const night = mongoNight(store, ctx(a), 50);
    let deleted = '';
    // A forget deletes (and counts) an entry the read has already passed.
    const racing = {
      ...night,
      async *hotStorage() {
        for await (const batch of night.hotStorage()) {
          yield batch;
          if (!deleted) {
            deleted = batch[batch.length - 1]!._id;
            await deleteEntry(store, a, deleted);
          }
        }
      },
    };
    await reclaimPhase(racing, ctx(a), nightPolicy);
    expect(deleted).not.toBe('');
    // The read's total holds the deleted entry: it is not set as the count, which stays in
    // doubt, so the next reclaim that has work reads every hot entry again.
    expect((await store.agents.findOne({ _id: a }))?.hotCountInDoubt).toBe(true);
  });

  it('gives an entry stored without its write day (by a worker of an earlier version) its day as the night counts it', async () => {
    const a = `a-${randomUUID()}`;
    await store.agents.insertOne({ _id: a, firstWriteAt: T0, hot: 0, cold: 0, hotWrittenFrom: dayOf(T0) });
    const late = entry(a, `${a}/unkeyed`, 'The ferry log unkeyed', { writtenAt: T0 + DAY_MS });
    await insertNewEntries(store, [late]);
    await store.hot.updateOne({ _id: late._id }, { $unset: { lastWriteKey: '' } });
    const night = mongoNight(store, ctx(a), 50);
    const found = (await store.hot.find({ _id: late._id }).toArray()).map((e) => ({
      entry: e,
      tier: 'hot' as const,
    }));
    await night.countTerms(found);
    expect((await store.hot.findOne({ _id: late._id }))?.lastWriteKey).toBe(`${a} ${dayOf(T0) + 1}`);
    expect((await night.hotWrittenOn(dayOf(T0) + 1)).map((e) => e._id)).toEqual([late._id]);
  });

  it('counts a new entry written before the day reclaim reads from, and moves it first', async () => {
    const a = `a-${randomUUID()}`;
    const hotEntries = sixDays(a);
    await store.hot.insertMany(hotEntries);
    await store.agents.insertOne({ _id: a, firstWriteAt: T0, hot: 120, cold: 0, hotWrittenFrom: dayOf(T0) });
    // Written since the last night with a time of its own, three days before any other.
    const late = entry(a, `${a}/backdated`, 'The ferry log backdated', { writtenAt: T0 - 3 * DAY_MS });
    await insertNewEntries(store, [late]);
    const night = mongoNight(store, ctx(a), 50);
    const found = (await store.hot.find({ _id: late._id }).toArray()).map((e) => ({
      entry: e,
      tier: 'hot' as const,
    }));
    await night.countTerms(found);
    expect((await store.agents.findOne({ _id: a }))?.hotWrittenFrom).toBe(dayOf(T0) - 3);
    await reclaimPhase(night, ctx(a), nightPolicy);
    expect(await tiersOf(a, late._id)).toEqual(['cold']);
  });

  it('leaves a new entry not yet counted where it is, and the count of those counted true', async () => {
    const a = `a-${randomUUID()}`;
    const hotEntries = sixDays(a);
    await store.hot.insertMany(hotEntries);
    await store.agents.insertOne({ _id: a, firstWriteAt: T0, hot: 120, cold: 0, hotWrittenFrom: dayOf(T0) });
    // Written after this night counted terms, dated among the oldest of its day.
    const late = entry(a, `${a}/uncounted`, 'The ferry log uncounted', { writtenAt: T0 + HOUR_MS / 2 });
    await insertNewEntries(store, [late]);
    await reclaimPhase(mongoNight(store, ctx(a), 50), ctx(a), nightPolicy);
    const counted = (await store.hot.find({ agentId: a }).toArray()).filter((e) => !awaitsCounting(e));
    expect((await store.agents.findOne({ _id: a }))?.hot).toBe(counted.length);
    // Moved once the night that counts it has: until then the count does not hold it.
    expect(await tiersOf(a, late._id)).toEqual(['hot']);
  });
});

describe('annotations on the real store', () => {
  it('a version-guarded annotation retries over a concurrent change and keeps both', async () => {
    const a = `a-${randomUUID()}`;
    const id = `${a}/e1`;
    await insertNewEntries(store, [entry(a, id, 'x y z')]);
    const undo = interleaveOnce(store, 'hot', 'updateOne', async () => {
      await store.hot.updateOne({ _id: id }, { $set: { confidence: 0.9 }, $inc: { version: 1 } });
    });
    let decisions = 0;
    await annotate(store, a, id, (e) => {
      decisions++;
      return e.refreshedAt ? undefined : { set: { refreshedAt: 5 }, unset: [] };
    });
    undo();
    expect(decisions).toBe(2);
    expect(await store.hot.findOne({ _id: id })).toMatchObject({
      refreshedAt: 5,
      confidence: 0.9,
      version: 3,
    });
  });

  it('supersede then restore gives the old fact back and unlinks the newer one', async () => {
    const a = `a-${randomUUID()}`;
    await insertNewEntries(store, [
      entry(a, `${a}/old`, 'Office in Paris.'),
      entry(a, `${a}/new`, 'Office in Berlin.'),
    ]);
    await supersedeEntry(store, ctx(a), `${a}/old`, `${a}/new`);
    await supersedeEntry(store, ctx(a), `${a}/old`, `${a}/new`);
    expect(await store.hot.findOne({ _id: `${a}/old` })).toMatchObject({
      isActive: false,
      supersededBy: `${a}/new`,
    });
    expect(await store.hot.findOne({ _id: `${a}/new` })).toMatchObject({ supersedes: `${a}/old` });
    const result = await restoreEntry(store, a, `${a}/old`, { at: T0 + 1 });
    expect(result).toEqual({ id: `${a}/old`, tier: 'hot', restored: ['supersession'] });
    // A retried restore (same time) completes quietly; a fresh one has nothing to restore.
    expect(await restoreEntry(store, a, `${a}/old`, { at: T0 + 1 })).toEqual(result);
    await expect(restoreEntry(store, a, `${a}/old`, { at: T0 + 2 })).rejects.toThrow(/not superseded/);
    const old = (await store.hot.findOne({ _id: `${a}/old` }))!;
    expect(old.isActive).toBe(true);
    expect(old.supersededBy).toBeUndefined();
    expect(old.restoredAt).toBe(T0 + 1);
    expect((await store.hot.findOne({ _id: `${a}/new` }))!.supersedes).toBeUndefined();
    expect(await restoreEntry(store, 'another-agent', `${a}/old`, { at: T0 + 3 })).toBeUndefined();
  });

  it('restore of a retired summary is refused when a night supersedes one of its sources as it writes', async () => {
    const a = `a-${randomUUID()}`;
    const office = entry(a, `${a}/office`, 'Office in Paris.', { subject: 'office', attribute: 'city' });
    const desk = entry(a, `${a}/desk`, 'Desk 12 by the window.');
    // Retired on an earlier night; its sources are both current again.
    const summary = entry(a, `${a}/sum`, 'Office in Paris. Desk 12 by the window.', {
      kind: 'summary',
      derivedFrom: [office._id, desk._id],
      isActive: false,
    });
    const newer = entry(a, `${a}/office-2`, 'Office in Berlin.', {
      subject: 'office',
      attribute: 'city',
      writtenAt: T0 + 1,
    });
    await insertNewEntries(store, [office, desk, summary, newer]);
    // The night supersedes the office and finds the summary still retired, right before the
    // restore writes it.
    const undo = interleaveOnce(
      store,
      'hot',
      'updateOne',
      async () => {
        await supersedeEntry(store, ctx(a), office._id, newer._id);
        await retireSummary(store, ctx(a), summary, { sourceId: office._id, supersededBy: newer._id });
      },
      (args) => (args[0] as { _id?: string })._id === summary._id,
    );
    const refused = await restoreEntry(store, a, summary._id, { at: T0 + 2 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    undo();
    expect(refused).toBeInstanceOf(ConflictError);
    expect((await store.hot.findOne({ _id: summary._id }))!.isActive).toBe(false);
    expect(await store.ledger.countDocuments({ agentId: a, event: 'restore' })).toBe(0);

    // An attempt that stopped before its second look leaves the summary current and its
    // record; the retry retires it and leaves no record of a restore that does not stand.
    await annotate(store, a, desk._id, (e) =>
      e.isActive ? undefined : { set: { isActive: true }, unset: [] },
    );
    await annotate(store, a, office._id, (e) =>
      e.isActive ? undefined : { set: { isActive: true }, unset: ['supersededBy'] },
    );
    let reads = 0;
    const stop = failOnce(store, 'hot', 'find', undefined, (args) => {
      const filter = args[0] as { _id?: { $in?: string[] } };
      return (filter._id?.$in?.includes(office._id) ?? false) && ++reads === 2;
    });
    await expect(restoreEntry(store, a, summary._id, { at: T0 + 3 })).rejects.toThrow(/injected/);
    stop();
    expect((await store.hot.findOne({ _id: summary._id }))!.isActive).toBe(true);
    await supersedeEntry(store, ctx(a), office._id, newer._id);
    await expect(restoreEntry(store, a, summary._id, { at: T0 + 3 })).rejects.toBeInstanceOf(ConflictError);
    expect((await store.hot.findOne({ _id: summary._id }))!.isActive).toBe(false);
    expect(await store.ledger.countDocuments({ agentId: a, event: 'restore' })).toBe(0);
  });

  it('restore finds nothing, and changes nothing, when the entry is deleted as it begins', async () => {
    const a = `a-${randomUUID()}`;
    await insertNewEntries(store, [
      entry(a, `${a}/old`, 'Office in Paris.'),
      entry(a, `${a}/new`, 'Office in Berlin.'),
    ]);
    await supersedeEntry(store, ctx(a), `${a}/old`, `${a}/new`);
    // Found superseded, then deleted (a forget, an eviction) before the restore's first write.
    const undo = interleaveOnce(store, 'ledger', 'replaceOne', async () => {
      await deleteEntry(store, a, `${a}/old`);
    });
    expect(await restoreEntry(store, a, `${a}/old`, { at: T0 + 1 })).toBeUndefined();
    undo();
    expect(await store.ledger.countDocuments({ agentId: a, event: 'restore' })).toBe(0);
    expect((await store.hot.findOne({ _id: `${a}/new` }))!.supersedes).toBe(`${a}/old`);
  });
});

describe('erasure steps on the real store', () => {
  it('leave a content-free tombstone, unlink summaries and supersession, and clean the query log', async () => {
    const a = `a-${randomUUID()}`;
    await insertNewEntries(store, [
      entry(a, `${a}/gone`, 'My badge code is 4471.', {
        supersedes: `${a}/older`,
        subsumedBy: [{ summaryId: `${a}/sum`, lossless: true }],
      }),
      entry(a, `${a}/older`, 'My badge code is 1234.', { isActive: false, supersededBy: `${a}/gone` }),
      entry(a, `${a}/sibling`, 'Badge codes rotate monthly.', {
        subsumedBy: [{ summaryId: `${a}/sum`, lossless: true }],
      }),
      entry(a, `${a}/sum`, '- My badge code is 4471.\n- Badge codes rotate monthly.', {
        kind: 'summary',
        // A third source was evicted earlier, with the summary standing in for it.
        derivedFrom: [`${a}/gone`, `${a}/sibling`, `${a}/evicted`],
      }),
    ]);
    await store.tombstones.insertOne({
      _id: `${a}/evicted`,
      agentId: a,
      terms: ['badge'],
      termKeys: [`${a} badge`],
      reason: 'x',
      deletedAt: 1,
      standIn: { summaryId: `${a}/sum`, lossy: false },
    });
    const logged = (n: number, query: string, hitIds: string[], extra: Partial<QueryLogRecord> = {}) => ({
      _id: `${a}-q${n}`,
      agentId: a,
      query,
      terms: query.split(' '),
      at: 1,
      day: 0,
      deep: false,
      k: 5,
      hitIds,
      ...extra,
    });
    await store.queries.insertMany([
      logged(1, 'badge code', [`${a}/gone`, `${a}/sibling`]),
      logged(2, 'rotation', [`${a}/sibling`]),
      // A deep recall whose words matched the entry's tombstone (evicted before it was erased).
      logged(3, 'badge code', [], { deep: true, missingIds: [`${a}/gone`] }),
    ]);
    expect(await tombstoneErasure(store, a, `${a}/nope`, 9)).toBe(false);
    expect(await tombstoneErasure(store, a, `${a}/gone`, 9)).toBe(true);
    await removeSummary(store, a, `${a}/sum`, `${a}/gone`, 9);
    expect(await unlinkSupersession(store, a, `${a}/gone`, 9)).toEqual([`${a}/older`]);
    expect(await eraseFromQueryLog(store, a, `${a}/gone`)).toBe(2);
    expect(await deleteEntry(store, a, `${a}/gone`)).toEqual(['hot']);
    // Rerunning every step changes nothing more.
    expect(await tombstoneErasure(store, a, `${a}/gone`, 9)).toBe(true);
    await removeSummary(store, a, `${a}/sum`, `${a}/gone`, 9);
    expect(await unlinkSupersession(store, a, `${a}/gone`, 9)).toEqual([]);
    expect(await deleteEntry(store, a, `${a}/gone`)).toEqual([]);

    expect(await store.tombstones.findOne({ _id: `${a}/gone` })).toMatchObject({
      terms: [],
      reason: 'erased',
    });
    expect(await store.tombstones.findOne({ _id: `${a}/sum` })).toMatchObject({
      terms: [],
      reason: `erased: derived from erased entry ${a}/gone`,
    });
    expect(await store.tombstones.findOne({ _id: `${a}/evicted` })).toMatchObject({
      standIn: { summaryId: `${a}/sum`, erased: true, lossy: true },
    });
    // Released: no link to the removed summary, and it awaits clustering again.
    const sibling = (await store.hot.findOne({ _id: `${a}/sibling` }))!;
    expect(sibling.subsumedBy).toBeUndefined();
    expect(sibling.pending).toContain('cluster');
    expect(await store.hot.findOne({ _id: `${a}/older` })).toMatchObject({ isActive: true });
    expect(await store.queries.countDocuments({ agentId: a })).toBe(1);
    const everything = JSON.stringify([
      await store.hot.find({ agentId: a }).toArray(),
      await store.cold.find({ agentId: a }).toArray(),
      await store.tombstones.find({ agentId: a }).toArray(),
      await store.queries.find({ agentId: a }).toArray(),
      await store.ledger.find({ agentId: a }).toArray(),
    ]);
    expect(everything).not.toContain('4471');
  });
});

describe('document frequencies on the real store', () => {
  const cases = [
    { name: 'forget deletes it', erasing: true },
    { name: 'a replayed copy of it is withdrawn, after its erasure ended', erasing: false },
  ];
  for (const { name, erasing } of cases) {
    it(`a night counting an entry's terms while ${name} leaves no count of it`, async () => {
      const a = `a-${randomUUID()}`;
      const id = `${a}/gone`;
      await insertNewEntries(store, [entry(a, id, 'Quartermaster ledgers balance on Fridays.')]);
      expect((await store.hot.findOne({ _id: id }))!.pending).toContain('terms');
      if (erasing) await beginErasure(store, a, id);
      await tombstoneErasure(store, a, id, 9);
      // The night counts the entry after the erasure read it awaiting its count (so there was
      // nothing to withdraw) and before the erasure deletes it.
      const night = mongoNight(store, { agentId: a, asOf: T0, runId: `${a}:run` }, 10);
      const undo = interleaveOnce(store, 'hot', 'findOneAndDelete', async () => {
        for await (const batch of night.pending('terms')) await night.countTerms(batch);
      });
      try {
        if (erasing) await deleteEntry(store, a, id);
        else await withdrawErased(store, a, [id]);
      } finally {
        undo();
      }
      if (erasing) await endErasure(store, a, id);
      expect(await tiersOf(a, id)).toEqual([]);
      expect(await overcounted(a)).toEqual([]);
    });
  }

  it("a night counting a summary's terms while forget rewrites it from its other source counts no erased word", async () => {
    const a = `a-${randomUUID()}`;
    const [gone, kept, sum] = [`${a}/gone`, `${a}/kept`, `${a}/sum`];
    const goneText = 'Quartermaster ledgers balance on Fridays.';
    const keptText = 'Depot gates open at dawn.';
    await insertNewEntries(store, [
      entry(a, gone, goneText, { subsumedBy: [{ summaryId: sum, lossless: true }] }),
      entry(a, kept, keptText, { subsumedBy: [{ summaryId: sum, lossless: true }] }),
      entry(a, sum, `- ${goneText}\n- ${keptText}`, { kind: 'summary', derivedFrom: [gone, kept] }),
    ]);
    await beginErasure(store, a, gone);
    await tombstoneErasure(store, a, gone, 9);
    // The night counts the summary after the rewrite read it awaiting its count (so there was
    // nothing to withdraw) and before the rewrite replaces its text.
    const night = mongoNight(store, { agentId: a, asOf: T0, runId: `${a}:run` }, 10);
    const undo = interleaveOnce(
      store,
      'hot',
      'updateOne',
      async () => {
        for await (const batch of night.pending('terms')) await night.countTerms(batch);
      },
      (args) => (args[0] as { _id: string })._id === sum,
    );
    const rewritten = entry(a, sum, `- ${keptText}`, { kind: 'summary', derivedFrom: [gone, kept] });
    try {
      await replaceSummaryContent(store, a, rewritten, new Map([[kept, true]]), gone, 9, { final: true });
    } finally {
      undo();
    }
    await deleteEntry(store, a, gone);
    await endErasure(store, a, gone);
    const stored = (await store.hot.findOne({ _id: sum }))!;
    expect(stored.text).toBe(`- ${keptText}`);
    // Recall scores by the counts kept beside the terms: the new text's, not the erased one's.
    expect(stored.termCounts).toEqual(countTerms(stored.text).termCounts);
    expect(await overcounted(a)).toEqual([]);
  });
});

/** The agent's terms counted for more stored entries than hold them. */
async function overcounted(agentId: string): Promise<string[]> {
  const out: string[] = [];
  for (const { _id, df } of await store.termStats.find({ agentId }).toArray()) {
    const held =
      (await store.hot.countDocuments({ termKeys: _id })) +
      (await store.cold.countDocuments({ termKeys: _id }));
    if (df > held) out.push(`${_id}: ${df} > ${held}`);
  }
  return out;
}
