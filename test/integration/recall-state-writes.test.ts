import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, inject, it } from 'vitest';
import { createEmbedActivities } from '../../activities/embed';
import { InvalidConfigError } from '../../core/errors';
import { entryId } from '../../core/ids';
import { EMBED_BATCH } from '../../llm/embedder';
import { buildEntry, memoryPolicy, type Entry } from '../../core/entry';
import { recallStateOf } from '../../core/recall';
import { DAY_MS } from '../../core/salience';
import type { Store } from '../../store/db';
import { insertNewEntries } from '../../store/entries';
import type { RunContext } from '../../store/ledger';
import { refreshHotEntries, spillEntries } from '../../store/nightly';
import {
  dropVectors,
  entriesToEmbed,
  restateForRecall,
  settleEmbedded,
  storeVectors,
} from '../../store/vectors';
import { deleteEntry } from '../../store/erasure';
import { tombstoneErasure } from '../../store/forget';
import { failOnce, interleaveOnce, observed } from '../support/faults';
import { proxyEmbeddings } from '../support/embeddingsProxy';
import { episode } from '../support/memories';
import { useTestEnv } from '../support/env';
import { spillStep } from '../support/reclaimSteps';

/**
 * The night's refreshes and spills keep the state beside each vector their entry's
 * (core/recall.ts, RecallState) with few reads: the entries are read once, after their change
 * numbers are taken, in one read per tier looked in, and the vectors' records in one read per
 * look. What the night itself wrote or read stands in for the first look at the entries, and a
 * concurrent restate that read them before the change landed is still overwritten by the
 * state after it.
 */

const env = useTestEnv();

const SPACE = { model: 'test-model', dimensions: 8 };
const T0 = Date.UTC(2025, 2, 1);
const N = 20;

const vector = (i: number) => {
  const v = Float32Array.from({ length: SPACE.dimensions }, (_, d) => Math.sin(i * 3.7 + d) + 1.5);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
};

const ctxOf = (agentId: string): RunContext => ({ agentId, asOf: T0 + 5 * DAY_MS, runId: `${agentId}:run` });

/** `n` hot entries of one agent, as written, each with the id `idOf` gives it. */
async function writtenEntries(
  agentId: string,
  n = N,
  idOf = (i: number) => `${agentId}/e${i}`,
): Promise<Entry[]> {
  const entries = Array.from({ length: n }, (_, i) =>
    buildEntry(
      idOf(i),
      agentId,
      episode(`Note ${i}: the courier calls on day ${i}.`, T0),
      memoryPolicy(env.config),
    ),
  );
  await insertNewEntries(env.store, entries);
  return entries;
}

/** N hot entries of one agent, each with its vector stored as the agent's workflow stores it. */
async function embeddedEntries(agentId: string): Promise<Entry[]> {
  const entries = await writtenEntries(agentId);
  const { toEmbed } = await entriesToEmbed(
    env.store,
    agentId,
    entries.map((e) => e._id),
    SPACE,
  );
  expect(toEmbed).toHaveLength(N);
  await storeVectors(
    env.store,
    agentId,
    SPACE,
    toEmbed.map((item, i) => ({ ...item, vector: vector(i) })),
    T0,
  );
  return entries;
}

/** The store, the reads of its tiers and vectors counted (a read by id or many by id). */
function countingReads(store: Store) {
  const reads = { hot: 0, cold: 0, vectors: 0 };
  const counted = <C extends 'hot' | 'cold' | 'vectors'>(collection: C): Store[C] =>
    observed(store[collection], (method) => {
      if (method === 'findOne' || method === 'find') reads[collection]++;
    });
  return {
    store: { ...store, hot: counted('hot'), cold: counted('cold'), vectors: counted('vectors') },
    reads,
  };
}

/** Each entry's state as it is now, and the state kept beside its vector. */
async function statesOf(agentId: string, ids: readonly string[]) {
  return Promise.all(
    ids.map(async (_id) => {
      const hot = await env.store.hot.findOne({ _id, agentId });
      const cold = await env.store.cold.findOne({ _id, agentId });
      const found = hot ? { entry: hot, tier: 'hot' as const } : { entry: cold!, tier: 'cold' as const };
      const record = await env.store.vectors.findOne({ _id, agentId });
      return { entry: recallStateOf(found.entry, found.tier), kept: record?.recall };
    }),
  );
}

const refreshSteps = (entries: readonly Entry[], asOf: number) =>
  entries.map((entry) => ({
    id: entry._id,
    tier: 'hot' as const,
    salience: { base: 0.9, at: asOf },
    dormantAt: asOf + 20 * DAY_MS,
    entry,
  }));

describe("the night's changes to the state kept beside each vector", () => {
  it('a refresh reads its entries once, one read a chunk, and leaves each vector its refreshed state', async () => {
    const agentId = env.agent('refresh-reads');
    const entries = await embeddedEntries(agentId);
    const ctx = ctxOf(agentId);
    const { store, reads } = countingReads(env.store);
    await refreshHotEntries(store, ctx, refreshSteps(entries, ctx.asOf));
    // Two chunks: each reads its entries after their numbers, and its records before the
    // widening and after the refresh.
    expect(reads).toEqual({ hot: 2, cold: 0, vectors: 4 });
    for (const { entry, kept } of await statesOf(
      agentId,
      entries.map((e) => e._id),
    )) {
      expect(entry).toMatchObject({ tier: 'hot', dormantAt: ctx.asOf + 20 * DAY_MS });
      expect(kept).toEqual(entry);
    }
  });

  it('a spill reads its entries once in each tier, in one read, and leaves each vector the cold state', async () => {
    const agentId = env.agent('spill-reads');
    const entries = await embeddedEntries(agentId);
    const ctx = ctxOf(agentId);
    const { store, reads } = countingReads(env.store);
    await spillEntries(
      store,
      ctx,
      entries.map((entry) => ({ step: spillStep(entry._id), entry })),
    );
    expect(reads).toEqual({ hot: 1, cold: 1, vectors: 1 });
    for (const { entry, kept } of await statesOf(
      agentId,
      entries.map((e) => e._id),
    )) {
      expect(entry.tier).toBe('cold');
      expect(kept).toEqual(entry);
    }
  });

  it('a refresh overtaken by a restate that read its entries before it landed still leaves their refreshed state', async () => {
    const agentId = env.agent('refresh-overtaken');
    const entries = await embeddedEntries(agentId);
    const ids = entries.map((e) => e._id);
    const ctx = ctxOf(agentId);
    // Between the widening and the refresh's own write, another writer (an embedding, a
    // forget) numbers its change and reads the entries as they were: it writes their old state.
    let overtaken = 0;
    const undo = interleaveOnce(env.store, 'hot', 'bulkWrite', async () => {
      await restateForRecall(env.store, agentId, ids, Date.now());
      const kept = await env.store.vectors.find({ agentId }).toArray();
      overtaken = kept.filter((r) => r.recall?.dormantAt !== ctx.asOf + 20 * DAY_MS).length;
    });
    try {
      await refreshHotEntries(env.store, ctx, refreshSteps(entries, ctx.asOf));
    } finally {
      undo();
    }
    expect(overtaken).toBe(N);
    for (const { entry, kept } of await statesOf(agentId, ids)) {
      expect(entry).toMatchObject({ tier: 'hot', dormantAt: ctx.asOf + 20 * DAY_MS });
      expect(kept).toEqual(entry);
    }
  });
});

describe("the write path's embedding", () => {
  it('reads the entries it embeds and their vectors a read per tier and one of the vectors, not one per entry', async () => {
    const agentId = env.agent('embed-reads');
    const entries = await writtenEntries(agentId);
    const ids = entries.map((e) => e._id);
    // A spilled entry is embedded where it is: the read looks in cold for what hot lacks.
    const spilled = entries.at(-1)!;
    await spillEntries(env.store, ctxOf(agentId), [{ step: spillStep(spilled._id), entry: spilled }]);

    const first = countingReads(env.store);
    const { toEmbed } = await entriesToEmbed(first.store, agentId, ids, SPACE);
    expect(toEmbed.map((t) => [t.id, t.tier])).toEqual(
      ids.map((id, i) => [id, i === N - 1 ? 'cold' : 'hot']),
    );
    expect(first.reads).toEqual({ hot: 1, cold: 1, vectors: 0 });

    const stored = countingReads(env.store);
    const kept = await storeVectors(
      stored.store,
      agentId,
      SPACE,
      toEmbed.map((item, i) => ({ ...item, vector: vector(i) })),
      T0,
    );
    expect(kept).toHaveLength(N);
    expect(stored.reads.hot).toBe(1);
    expect(stored.reads.cold).toBe(1);

    // Embedded once, the entries name the model: their vectors are read to tell which are current.
    await settleEmbedded(env.store, agentId, kept, SPACE.model);
    const again = countingReads(env.store);
    const second = await entriesToEmbed(again.store, agentId, ids, SPACE);
    expect(second.toEmbed).toEqual([]);
    expect(second.current).toHaveLength(N);
    expect(again.reads).toEqual({ hot: 1, cold: 1, vectors: 1 });
  });
});

describe("the agent's workflow's embedding activity", () => {
  it('stores the vectors of each request before it reads the entries of the next', async () => {
    // Sixteen agents' lanes each reading a whole batch of entries at once, at the end of a burst,
    // held the store from the writes that followed; and a batch embedded whole stored nothing
    // until its last request came back.
    const agentId = env.agent('embed-by-request');
    // Ids as the write path derives them: the activity takes no other.
    const written = await writtenEntries(agentId, EMBED_BATCH + 8, (i) =>
      entryId(agentId, { idempotencyKey: `e${i}` }),
    );
    const ids = written.map((e) => e._id);
    const steps: string[] = [];
    const store: Store = {
      ...env.store,
      hot: observed(env.store.hot, (method) => {
        if (method === 'find') steps.push('read entries');
      }),
      vectors: observed(env.store.vectors, (method) => {
        if (method === 'insertMany') steps.push('store vectors');
      }),
    };
    const { embedEntries } = createEmbedActivities(store, env.config, env.endpoints.embeddings);
    const outcome = await new MockActivityEnvironment().run(embedEntries, { agentId, ids });
    expect(outcome).toEqual({ embedded: ids.length });
    // Each request: its entries read to embed them, its vectors stored, the entries read again
    // to keep only the vectors of those still stored as they were.
    const request = ['read entries', 'store vectors', 'read entries'];
    expect(steps).toEqual([...request, ...request]);
    expect(await env.store.vectors.countDocuments({ agentId, vector: { $exists: true } })).toBe(ids.length);
  });
});

describe('the embedding activity, retried', () => {
  it('drops the vector an attempt stored for an entry erased while it embedded, and failed before it looked again', async () => {
    const agentId = env.agent('embed-erased-retry');
    const [entry] = await writtenEntries(agentId, 1, (i) => entryId(agentId, { idempotencyKey: `e${i}` }));
    const id = entry!._id;
    const { toEmbed } = await entriesToEmbed(env.store, agentId, [id], SPACE);
    // Forgotten while the attempt embeds: its drop of the vectors finds none yet.
    await tombstoneErasure(env.store, agentId, id, T0);
    await deleteEntry(env.store, agentId, id);
    // The attempt stores the vector, then fails at the look that would have dropped it.
    const undo = failOnce(env.store, 'hot', 'find');
    try {
      await expect(
        storeVectors(env.store, agentId, SPACE, [{ ...toEmbed[0]!, vector: vector(0) }], T0),
      ).rejects.toThrow(/injected failure/);
    } finally {
      undo();
    }
    const stored = () => env.store.vectors.findOne({ _id: id, vector: { $exists: true } });
    expect(await stored()).not.toBeNull();
    const { embedEntries } = createEmbedActivities(env.store, env.config, env.endpoints.embeddings);
    await new MockActivityEnvironment().run(embedEntries, { agentId, ids: [id] });
    expect(await stored()).toBeNull();
  });
});

describe("reembed's embedding step", () => {
  it('is refused by a worker that embeds at other dimensions than the caller asked for, as for another model', async () => {
    const agentId = env.agent('reembed-dimensions');
    await writtenEntries(agentId, 2, (i) => entryId(agentId, { idempotencyKey: `e${i}` }));
    const { reembedAwaiting } = createEmbedActivities(env.store, env.config, env.endpoints.embeddings);
    const asked = {
      agentId,
      model: env.config.embeddingsModel,
      dimensions: 2 * env.config.embeddingsDimensions,
    };
    const refused = await new MockActivityEnvironment().run(reembedAwaiting, asked).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidConfigError);
    expect((refused as InvalidConfigError).message).toMatch(/MEMGATE_EMBEDDINGS_DIMENSIONS/);
    expect(await env.store.vectors.countDocuments({ agentId })).toBe(0);
  });
});

describe("the night's embedding, when the endpoint refuses one text", () => {
  it('embeds and keeps every other entry, and leaves that one awaiting its vector', async () => {
    const agentId = env.agent('embed-refused-text');
    const written = await writtenEntries(agentId, 40, (i) => entryId(agentId, { idempotencyKey: `e${i}` }));
    const bad = written[3]!;
    // The real server, but a vector with no direction for the one text (an unusable answer).
    let refusedAt: number | undefined;
    const proxy = await proxyEmbeddings(inject('embeddingsPassagesUrl'), {
      onRequest(body) {
        const input = (body as { input: string[] }).input;
        refusedAt = input.findIndex((t) => t.includes(bad.text));
        return () => undefined;
      },
      onAnswer(answer) {
        const d = refusedAt === undefined ? undefined : answer.data?.[refusedAt];
        if (d)
          d.embedding = Array.isArray(d.embedding)
            ? d.embedding.map(() => 0)
            : Buffer.alloc(4 * env.config.embeddingsDimensions).toString('base64');
      },
    });
    try {
      const { embedPhase } = createEmbedActivities(env.store, env.config, {
        queryUrls: [proxy.url],
        passagesUrl: proxy.url,
      });
      const run = { agentId, asOf: Date.now(), runId: `${agentId}:night`, policy: env.client.policy };
      await new MockActivityEnvironment().run(embedPhase, run);
    } finally {
      await proxy.close();
    }
    const vectors = await env.store.vectors.find({ agentId, vector: { $exists: true } }).toArray();
    expect(vectors.map((v) => v._id).sort()).toEqual(
      written
        .filter((e) => e !== bad)
        .map((e) => e._id)
        .sort(),
    );
    expect((await env.store.hot.findOne({ _id: bad._id }))!.pending).toContain('embed');
  });
});

describe('dropping vectors', () => {
  it('reads their records in one read, not one per entry, and leaves each record without its vector', async () => {
    const agentId = env.agent('drop-reads');
    const ids = (await embeddedEntries(agentId)).map((e) => e._id);
    const { store, reads } = countingReads(env.store);
    await dropVectors(store, agentId, ids, T0 + DAY_MS);
    expect(reads.vectors).toBe(1);
    const records = await env.store.vectors.find({ agentId }).toArray();
    expect(records.map((r) => r._id).sort()).toEqual([...ids].sort());
    expect(records.every((r) => r.vector === undefined)).toBe(true);
  });

  it('leaves no vector when a restate numbered after an erasure lands before its clear', async () => {
    const agentId = env.agent('drop-overtaken');
    const entries = await embeddedEntries(agentId);
    const erased = entries[0]!;
    // The erasure has removed the content and numbered its change; before its clear lands, a
    // night's spill restates the entry with the state it wrote (numbered after, landing first).
    await env.store.hot.deleteOne({ _id: erased._id });
    const undo = interleaveOnce(env.store, 'vectors', 'bulkWrite', async () => {
      await restateForRecall(env.store, agentId, [erased._id], Date.now(), {
        known: new Map([[erased._id, recallStateOf(erased, 'cold')]]),
      });
    });
    try {
      await dropVectors(env.store, agentId, [erased._id], T0 + DAY_MS);
    } finally {
      undo();
    }
    const record = await env.store.vectors.findOne({ _id: erased._id });
    expect(record).not.toBeNull();
    expect(record?.vector).toBeUndefined();
  });

  it('stores a vector of another model though a restate numbered after it lands first', async () => {
    const agentId = env.agent('reembed-overtaken');
    const [entry] = await embeddedEntries(agentId);
    const next = { model: 'test-model-2', dimensions: 8 };
    const { toEmbed } = await entriesToEmbed(env.store, agentId, [entry!._id], next);
    expect(toEmbed).toHaveLength(1);
    // Between the new vector's number and its write, a night's spill restates the entry.
    const undo = interleaveOnce(env.store, 'vectors', 'bulkWrite', async () => {
      await restateForRecall(env.store, agentId, [entry!._id], Date.now(), {
        known: new Map([[entry!._id, recallStateOf(entry!, 'cold')]]),
      });
    });
    let kept;
    try {
      kept = await storeVectors(
        env.store,
        agentId,
        next,
        [{ ...toEmbed[0]!, vector: vector(7) }],
        T0 + DAY_MS,
      );
    } finally {
      undo();
    }
    expect(kept).toEqual([{ id: entry!._id, tier: 'hot' }]);
    expect(await env.store.vectors.findOne({ _id: entry!._id })).toMatchObject({ model: next.model });
  });
});
