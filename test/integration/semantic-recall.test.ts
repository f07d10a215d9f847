import { tsToMs } from '@temporalio/common/lib/time';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { MemgateClient } from '../../client/client';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import type { Store } from '../../store/db';
import { entryId } from '../../core/ids';
import { insertNewEntries } from '../../store/entries';
import { startTestEnv, type TestEnv } from '../support/env';
import { createMemgateWorker } from '../../worker/worker';
import { VectorBudget } from '../../store/vectorIndexes';
import { MEMORIES, PARAPHRASE } from '../support/memories';
import { untilEmbedded } from '../support/embedded';
import { failOnce } from '../support/faults';
import { recordingEmbeddings } from '../support/recordingEmbeddings';
import { embeddedQueryOf } from '../../core/recall';

/**
 * Semantic recall against the real embeddings server the stack runs: what the agent means
 * is found without a shared word, the gate and erasure hold for vectors as for words, and a
 * change of model is reported until `reembed` converts the store.
 */

let env: TestEnv;
const T0 = Date.now() - 3 * DAY_MS;

/** Every read of `store`'s vector records waits for `gate`: an index load then outlasts any wait. */
function holdVectorReads(store: Store, gate: Promise<void>): void {
  const vectors = store.vectors;
  store.vectors = new Proxy(vectors, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (prop !== 'find') return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      return (...args: Parameters<typeof vectors.find>) => {
        const cursor = target.find(...args);
        const held = {
          batchSize: (n: number) => (cursor.batchSize(n), held),
          toArray: async () => (await gate, cursor.toArray()),
          close: () => cursor.close(),
          async *[Symbol.asyncIterator]() {
            await gate;
            yield* cursor;
          },
        };
        return held;
      };
    },
  });
}

/** An agent holding MEMORIES, written at T0 on, once its workflow has embedded them all. */
async function embeddedMemories(name: string): Promise<{ agentId: string; ids: string[] }> {
  const agentId = env.agent(name);
  const { entries } = await env.client.write({
    agentId,
    entries: MEMORIES.map((text, i) => ({ text, writtenAt: T0 + i })),
  });
  const ids = entries.map((e) => e.id);
  // The write was acknowledged before any vector: the agent's workflow embeds afterwards.
  await untilEmbedded(env.store, agentId, ids);
  return { agentId, ids };
}

/** A client of its own whose queries go to these endpoints, passages to the stack's server. */
function clientQueryingAt(queryUrls: string[]): Promise<MemgateClient> {
  return MemgateClient.connect(env.config, {
    ...env.endpoints,
    embeddings: { queryUrls, passagesUrl: inject('embeddingsPassagesUrl') },
  });
}

beforeAll(async () => {
  env = await startTestEnv();
}, 120_000);
afterAll(async () => {
  await env?.close();
});

describe('recall without embeddings says it is lexical only', () => {
  it('with no endpoint, and with an endpoint that fails', async () => {
    const agentId = env.agent('lexical');
    await env.client.write({ agentId, entries: MEMORIES.map((text, i) => ({ text, writtenAt: T0 + i })) });
    const none = await MemgateClient.connect(env.config, {
      ...env.endpoints,
      embeddings: { unavailable: 'no embeddings endpoint configured' },
    });
    const down = await MemgateClient.connect(env.config, {
      ...env.endpoints,
      embeddings: { queryUrls: ['http://127.0.0.1:9/v1'], passagesUrl: 'http://127.0.0.1:9/v1' },
    });
    try {
      const a = await none.recall({ agentId, query: 'favourite colour' });
      expect(a.retrieval).toEqual({ mode: 'lexical', reason: 'no embeddings endpoint configured' });
      expect(a.hits[0]).toMatchObject({ text: MEMORIES[0], foundBy: 'lexical' });
      const b = await down.recall({ agentId, query: PARAPHRASE });
      expect(b.retrieval.mode).toBe('lexical');
      expect((b.retrieval as { reason: string }).reason).toMatch(/could not be embedded/);
      expect(b.hits).toEqual([]);
    } finally {
      await none.close();
      await down.close();
    }
  }, 60_000);
});

describe('query embeddings at an endpoint that embeds one request at a time', () => {
  it("are bounded in length, and an agent's go one at a time, so another agent's wait behind one at most", async () => {
    const { agentId } = await embeddedMemories('one-at-a-time');
    const queries = await recordingEmbeddings(inject('embeddingsQueryUrls')[0]!);
    const client = await clientQueryingAt([queries.url]);
    // As long as a query may be: 2,000 distinct CJK characters.
    const long = Array.from({ length: 2_000 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join(' ');
    const asked = [
      long,
      PARAPHRASE,
      `${long.slice(0, 1_000)} favourite colour`,
      PARAPHRASE,
      long,
      PARAPHRASE,
    ];
    try {
      const answers = await Promise.all(asked.map((query) => client.recall({ agentId, query })));
      for (const a of answers) expect(a.retrieval.mode).toBe('hybrid');
      expect(queries.record.mostInFlight).toBe(1);
      expect(queries.record.requests.map((r) => r.input).sort()).toEqual(
        asked.map((q) => [embeddedQueryOf(q)]).sort(),
      );
      expect(Math.max(...queries.record.requests.map((r) => r.input[0]!.length))).toBeLessThan(
        long.length / 10,
      );
    } finally {
      await client.close();
      await queries.close();
    }
  }, 60_000);
});

describe('query embeddings over several query servers', () => {
  it("go where the fewest of the process's queries are: another agent's query never waits behind one agent's at a busy server", async () => {
    const [a, b] = await Promise.all([embeddedMemories('busy-server'), embeddedMemories('free-server')]);
    const [first, second = first] = inject('embeddingsQueryUrls');
    let release!: () => void;
    const busy = await recordingEmbeddings(first!, { busyUntil: new Promise<void>((r) => (release = r)) });
    const free = await recordingEmbeddings(second!);
    const client = await clientQueryingAt([busy.url, free.url]);
    try {
      // With none in flight, the first listed: a quiet process uses one server.
      const held = client.recall({ agentId: a.agentId, query: PARAPHRASE });
      await vi.waitUntil(() => busy.record.requests.length === 1, { timeout: 30_000 });
      // Answered while the first server still holds a's query: at one endpoint it would wait.
      const meanwhile = await client.recall({ agentId: b.agentId, query: PARAPHRASE });
      expect(meanwhile.retrieval.mode).toBe('hybrid');
      expect(meanwhile.hits[0]?.id).toBe(b.ids[0]);
      expect(free.record.requests.map((r) => r.input)).toEqual([[embeddedQueryOf(PARAPHRASE)]]);
      expect(busy.record.requests).toHaveLength(1);
      release();
      expect((await held).retrieval.mode).toBe('hybrid');
    } finally {
      release();
      await client.close();
      await busy.close();
      await free.close();
    }
  }, 60_000);
});

describe("an agent's first hybrid recall in a process", () => {
  it('answers lexically, saying the index is loading, once it has waited MEMGATE_RECALL_INDEX_WAIT_MS; the load goes on', async () => {
    const { agentId } = await embeddedMemories('loading');
    // A process of its own, so the agent's index is not in its memory yet; it waits not at all.
    const impatient = await MemgateClient.connect({ ...env.config, recallIndexWaitMs: 0 }, env.endpoints);
    // The load starts while the query embeds: held until the first recall has answered, so that
    // it outlasts the embedding however fast that is.
    let release!: () => void;
    holdVectorReads(impatient.store, new Promise<void>((r) => (release = r)));
    try {
      const first = await impatient.recall({ agentId, query: PARAPHRASE });
      release();
      expect(first.retrieval.mode).toBe('lexical');
      expect((first.retrieval as { reason: string }).reason).toMatch(/vector index is loading/);
      let later = first;
      for (
        const deadline = Date.now() + 60_000;
        later.retrieval.mode !== 'hybrid' && Date.now() < deadline;
      ) {
        await new Promise((r) => setTimeout(r, 100));
        later = await impatient.recall({ agentId, query: PARAPHRASE });
      }
      expect(later.retrieval.mode).toBe('hybrid');
      expect(later.hits[0]).toMatchObject({ text: MEMORIES[0], foundBy: 'semantic' });
    } finally {
      await impatient.close();
    }
  }, 120_000);
});

describe('a worker with no embeddings endpoint', () => {
  it('is asked once per run, and leaves the entries to the night', async () => {
    const lexical = await startTestEnv(
      {},
      { embeddings: { unavailable: 'no embeddings endpoint configured' } },
    );
    try {
      const agentId = lexical.agent('no-endpoint');
      const handle = lexical.client.temporal.workflow.getHandle(`memgate-agent-${agentId}`);
      const asked = async () =>
        ((await handle.fetchHistory()).events ?? []).filter(
          (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'embedEntries',
        ).length;
      const write = async (texts: string[]) => {
        const ids: string[] = [];
        for (const text of texts) {
          ids.push(
            ...(await lexical.client.write({ agentId, entries: [{ text }] })).entries.map((e) => e.id),
          );
        }
        return ids;
      };
      const ids = await write(MEMORIES.slice(0, 2));
      // Asked once, in the pause after the first writes...
      while ((await asked()) === 0) await new Promise((r) => setTimeout(r, 200));
      // ...and not again for later writes, however long they wait.
      ids.push(...(await write(MEMORIES.slice(2))));
      await new Promise((r) => setTimeout(r, 3 * 1_000));
      expect(await asked()).toBe(1);
      const entries = await lexical.store.hot.find({ agentId }).toArray();
      expect(entries.map((e) => e._id).sort()).toEqual([...ids].sort());
      for (const e of entries) expect(e.pending).toContain('embed');
    } finally {
      await lexical.close();
    }
  }, 60_000);
});

describe('the write path embeds in a pause of the writes', () => {
  it("schedules no embedding while an agent's writes flow, and embeds them all once they pause", async () => {
    const agentId = env.agent('burst');
    // Three writers, each sending its next write as soon as the last is acknowledged: the
    // agent's workflow persists a batch every few tens of milliseconds until the burst ends.
    const lanes = await Promise.all(
      [0, 1, 2].map(async (lane) => {
        const ids: string[] = [];
        for (let i = 0; i < 15; i++) {
          const text = `Writer ${lane} noted that crate ${i} left the depot on time.`;
          ids.push(...(await env.client.write({ agentId, entries: [{ text }] })).entries.map((e) => e.id));
        }
        return ids;
      }),
    );
    const ids = lanes.flat();
    await untilEmbedded(env.store, agentId, ids);

    const { events } = await env.client.temporal.workflow
      .getHandle(`memgate-agent-${agentId}`)
      .fetchHistory();
    // Each embedding was scheduled a second or more after the last batch persisted before it
    // (a local activity's marker): never while writes flowed, however slowly this machine ran.
    let lastPersistAt: number | undefined;
    const quietBeforeEmbedding: number[] = [];
    for (const e of events ?? []) {
      if (e.markerRecordedEventAttributes) lastPersistAt = tsToMs(e.eventTime);
      if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'embedEntries') {
        quietBeforeEmbedding.push(tsToMs(e.eventTime) - lastPersistAt!);
      }
    }
    expect(quietBeforeEmbedding.length).toBeGreaterThan(0);
    for (const quiet of quietBeforeEmbedding) expect(quiet).toBeGreaterThanOrEqual(1_000);
  }, 120_000);
});

describe('hybrid recall', () => {
  it('finds a paraphrase that shares no word, and says it was found by meaning', async () => {
    const { agentId, ids } = await embeddedMemories('paraphrase');

    const res = await env.client.recall({ agentId, query: PARAPHRASE });
    expect(res.retrieval).toMatchObject({
      mode: 'hybrid',
      model: env.config.embeddingsModel,
      otherModelVectors: 0,
    });
    expect(res.hits[0]).toMatchObject({ id: ids[0], foundBy: 'semantic' });
    expect(res.hits[0]!.similarity).toBeGreaterThan(0);

    // A query that shares words and meaning is found both ways.
    const both = await env.client.recall({ agentId, query: 'favourite colour' });
    expect(both.hits[0]).toMatchObject({ id: ids[0], foundBy: 'both' });

    // The embedding ran as an activity of the agent's workflow, visible in its history.
    const history = await env.client.temporal.workflow.getHandle(`memgate-agent-${agentId}`).fetchHistory();
    const scheduled = (history.events ?? []).flatMap((e) =>
      e.activityTaskScheduledEventAttributes?.activityType?.name
        ? [e.activityTaskScheduledEventAttributes.activityType.name]
        : [],
    );
    expect(scheduled).toContain('embedEntries');
  }, 120_000);

  // What the LongMemEval question met: the answer by meaning is the nearest, but
  // notes that share a word of the query and are far more salient outscore it
  // (core/hybrid.ts, placeNearest).
  it('keeps a place in the top k for the nearest match by meaning, below salient notes that share a word', async () => {
    const agentId = env.agent('nearest-place');
    const notes = [
      'I prefer the window seat on long trains.',
      'The accountants prefer invoices sent by email.',
      'Most of the team prefer the early meeting slot.',
      'Guests prefer the quiet rooms on the top floor.',
    ];
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { text: MEMORIES[0], salience: 0.2, writtenAt: T0 },
        ...notes.map((text, i) => ({ text, salience: 1, writtenAt: T0 + 1 + i })),
      ],
    });
    const fact = entries[0]!.id;
    await untilEmbedded(
      env.store,
      agentId,
      entries.map((e) => e.id),
    );
    const asOf = T0 + HOUR_MS;

    // By score alone, two notes come before it: it is the third.
    const all = await env.client.recall({ agentId, query: PARAPHRASE, k: 10, asOf });
    expect(all.retrieval).toMatchObject({ mode: 'hybrid' });
    expect(all.hits.findIndex((h) => h.id === fact)).toBe(2);
    const nearest = Math.max(...all.hits.map((h) => h.similarity ?? -1));
    expect(all.hits[2]).toMatchObject({ foundBy: 'semantic', similarity: nearest });

    // Asked for two, it keeps the second place, below the best of the notes.
    const two = await env.client.recall({ agentId, query: PARAPHRASE, k: 2, asOf });
    expect(two.hits.map((h) => h.id)).toEqual([all.hits[0]!.id, fact]);
    // One place is the fusion's alone.
    const one = await env.client.recall({ agentId, query: PARAPHRASE, k: 1, asOf });
    expect(one.hits.map((h) => h.id)).toEqual([all.hits[0]!.id]);
  }, 120_000);

  it('leaves no record in the query log of a recall that failed after it logged the hits it expected', async () => {
    const { agentId, ids } = await embeddedMemories('failed-after-logging');
    // Each hit's successor is read after the hits are ranked and logged, and that read fails.
    const successor = `${agentId}/successor`;
    await env.store.hot.updateMany({ agentId, _id: { $in: ids } }, { $set: { supersededBy: successor } });
    const undo = failOnce(env.store, 'hot', 'find', undefined, (args) =>
      JSON.stringify(args[0]).includes(successor),
    );
    try {
      await expect(env.client.recall({ agentId, query: PARAPHRASE, deep: true })).rejects.toThrow(
        /injected failure/,
      );
    } finally {
      undo();
    }
    // The night refreshes what the log says a recall returned: this one returned nothing.
    expect(await env.store.queries.countDocuments({ agentId })).toBe(0);
  }, 120_000);

  it('keeps a dormant entry out of default recall however similar it is; deep recall finds it', async () => {
    const agentId = env.agent('dormant');
    const { entries } = await env.client.write({
      agentId,
      entries: [
        { text: 'My favourite colour is teal.', salience: 0.1, writtenAt: T0 },
        { text: 'The espresso machine on floor two needs descaling.', salience: 0.9, writtenAt: T0 },
      ],
    });
    const [quiet] = entries.map((e) => e.id);
    await untilEmbedded(
      env.store,
      agentId,
      entries.map((e) => e.id),
    );
    const later = T0 + 2 * DAY_MS;
    const gated = await env.client.recall({ agentId, query: PARAPHRASE, asOf: later });
    expect(gated.retrieval.mode).toBe('hybrid');
    expect(gated.hits.map((h) => h.id)).not.toContain(quiet);
    const deep = await env.client.recall({ agentId, query: PARAPHRASE, asOf: later, deep: true });
    expect(deep.hits[0]).toMatchObject({ id: quiet, dormant: true, foundBy: 'semantic' });
  }, 120_000);

  it('forget removes the vector with the content: no recall finds the entry by meaning', async () => {
    const { agentId, ids } = await embeddedMemories('forget');
    // The index is loaded before the erasure: it must learn of it from the store.
    expect((await env.client.recall({ agentId, query: PARAPHRASE })).hits[0]?.id).toBe(ids[0]);

    await env.client.forget({ agentId, entryId: ids[0]! });
    const record = await env.store.vectors.findOne({ _id: ids[0]!, agentId });
    expect(record).not.toBeNull();
    expect(record!.vector).toBeUndefined();
    expect(record!.textHash).toBeUndefined();
    const deep = await env.client.recall({ agentId, query: PARAPHRASE, deep: true });
    expect(deep.hits.map((h) => h.id)).not.toContain(ids[0]);
    // A process that loads the agent's index afresh does not find it either.
    const fresh = await MemgateClient.connect(env.config, env.endpoints);
    try {
      const again = await fresh.recall({ agentId, query: PARAPHRASE, deep: true });
      expect(again.hits.map((h) => h.id)).not.toContain(ids[0]);
    } finally {
      await fresh.close();
    }
  }, 120_000);

  it('the night embeds what the write path missed, and the summaries it writes', async () => {
    const agentId = env.agent('night');
    const policy = memoryPolicy(env.config);
    // Entries stored but never embedded, as when the workflow's embedding calls all failed.
    const missed = ['The loading dock opens at six.', 'The loading dock opens at six each day.'].map(
      (text, i) =>
        buildEntry(
          entryId(agentId, { idempotencyKey: `missed-${i}` }),
          agentId,
          {
            text,
            kind: 'episode',
            salience: 0.8,
            source: { origin: 'agent' },
            confidence: 0.5,
            verified: false,
            volatile: false,
            writtenAt: T0 + i * HOUR_MS,
          },
          policy,
        ),
    );
    await insertNewEntries(env.store, missed);
    expect(await env.store.vectors.countDocuments({ agentId })).toBe(0);

    const report = await env.client.consolidate({ agentId, asOf: T0 + DAY_MS });
    expect(report.counts.summarised).toBe(1);
    // Both entries, and the summary of the two.
    expect(report.counts.embedded).toBe(3);
    const pending = await env.store.hot.countDocuments({ agentId, pending: 'embed' });
    expect(pending).toBe(0);
    const summary = await env.store.hot.findOne({ agentId, kind: 'summary' });
    expect(summary?.embeddedWith).toBe(env.config.embeddingsModel);
    expect(await env.store.vectors.countDocuments({ agentId })).toBe(3);
  }, 120_000);

  it('the night merges rewordings of one fact by meaning when the policy asks, and only then', async () => {
    // Lexically below the cluster threshold (3 of 5 and 6 terms), one fact by meaning; the
    // third is another fact about the same kind of thing.
    const texts = [
      'The deploy pipeline takes about twenty minutes.',
      'A deployment through the pipeline needs roughly 20 minutes.',
      'The test suite takes about eleven minutes.',
    ];
    const byMeaning = await startTestEnv({ MEMGATE_CLUSTER_BY_MEANING: 'true' });
    try {
      for (const e of [env, byMeaning]) {
        const agentId = e.agent('rewording');
        const { entries } = await e.client.write({
          agentId,
          entries: texts.map((text, i) => ({ text, writtenAt: T0 + i * HOUR_MS })),
        });
        const ids = entries.map((x) => x.id);
        await untilEmbedded(e.store, agentId, ids);
        const report = await e.client.consolidate({ agentId, asOf: T0 + DAY_MS });
        const summaries = await e.store.hot.find({ agentId, kind: 'summary' }).toArray();
        if (e === env) {
          expect(report.counts.summarised).toBe(0);
          expect(summaries).toEqual([]);
        } else {
          expect(report.counts.summarised).toBe(1);
          expect(summaries.map((x) => [...(x.derivedFrom ?? [])].sort())).toEqual([ids.slice(0, 2).sort()]);
        }
      }
    } finally {
      await byMeaning.close();
    }
  }, 180_000);

  it('the night searches the one index set of its process, and a worker of its own closes its set when it stops', async () => {
    const texts = [
      'The deploy pipeline takes about twenty minutes.',
      'The test suite takes about eleven minutes.',
    ];
    // A bound of its own, so this budget is this test's alone.
    const maxVectors = 12_345;
    const budget = VectorBudget.forProcess(maxVectors);
    const overrides = {
      MEMGATE_CLUSTER_BY_MEANING: 'true',
      MEMGATE_VECTOR_INDEX_MAX_VECTORS: String(maxVectors),
    };

    /** Two entries of one agent, embedded, then a night over them (which clusters by meaning). */
    const writeAndConsolidate = async (e: TestEnv, name: string) => {
      const agentId = e.agent(name);
      const { entries } = await e.client.write({
        agentId,
        entries: texts.map((text, i) => ({ text, writtenAt: T0 + i * HOUR_MS })),
      });
      await untilEmbedded(
        e.store,
        agentId,
        entries.map((x) => x.id),
      );
      await e.client.consolidate({ agentId, asOf: T0 + DAY_MS });
    };

    // As in `memgate start`: the worker searches the client's set.
    const shared = await startTestEnv(overrides);
    try {
      expect(budget.members.size).toBe(1);
      await writeAndConsolidate(shared, 'one-set');
      // The night loaded the agent into the client's set, where recall finds it loaded.
      expect(shared.client.vectorIndexes.size).toBe(2);
      expect(budget.members.size).toBe(1);
      expect(budget.held).toBe(2);
    } finally {
      await shared.close();
    }
    expect(budget.members.size).toBe(0);

    // A worker alone (`memgate worker`) keeps a set of its own, and leaves the budget when it stops.
    const alone = await startTestEnv(overrides, { inProcessWorker: false });
    const worker = await createMemgateWorker(alone.config, alone.endpoints, {
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });
    const running = worker.run();
    try {
      await writeAndConsolidate(alone, 'own-set');
      expect(budget.members.size).toBe(2);
      expect(budget.held).toBe(2);
    } finally {
      worker.worker.shutdown();
      await running;
    }
    expect(budget.members.size).toBe(1);
    expect(budget.held).toBe(0);
    await alone.close();
  }, 180_000);

  it('reports a change of model, and reembed converts the store to the new one', async () => {
    const { agentId, ids } = await embeddedMemories('model');

    // The same server under another model name: to memgate, another model.
    const renamed = 'multilingual-e5-small-q4-renamed';
    await env.stopWorker();
    const next = await startTestEnv({
      MEMGATE_DB: env.config.database,
      MEMGATE_TASK_QUEUE: env.config.taskQueue,
      MEMGATE_EMBEDDINGS_MODEL: renamed,
    });
    try {
      const before = await next.client.recall({ agentId, query: PARAPHRASE });
      expect(before.retrieval).toMatchObject({
        mode: 'hybrid',
        model: renamed,
        otherModelVectors: ids.length,
      });
      expect(before.hits.map((h) => h.id)).not.toContain(ids[0]);

      const result = await next.client.reembed({ agentId });
      expect(result).toEqual({ agentId, model: renamed, marked: ids.length, embedded: ids.length });
      await untilEmbedded(env.store, agentId, ids, renamed);

      const after = await next.client.recall({ agentId, query: PARAPHRASE });
      expect(after.retrieval).toMatchObject({ mode: 'hybrid', model: renamed, otherModelVectors: 0 });
      expect(after.hits[0]).toMatchObject({ id: ids[0], foundBy: 'semantic' });
      // Run again, it finds nothing left to convert.
      const again = await next.client.reembed({ agentId });
      expect(again.embedded).toBe(0);
    } finally {
      await env.restartWorker();
      await next.close();
    }
  }, 180_000);
});
