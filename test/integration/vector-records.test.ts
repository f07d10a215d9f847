import { Binary } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { MemgateClient } from '../../client/client';
import { DAY_MS } from '../../core/salience';
import { startTestEnv, type TestEnv } from '../support/env';
import { MEMORIES, PARAPHRASE } from '../support/memories';
import { untilEmbedded } from '../support/embedded';
import { paddedEmbeddings } from '../support/paddedEmbeddings';

/**
 * Vector records that do not fit the space a recall searches in: unusable ones (a NaN, a
 * zero vector, one of the wrong length, as a faulty writer or an older version may leave)
 * are skipped and counted, never failing a recall; and a change of dimensions under the
 * same model name is another space, which `reembed` converts the store to.
 */

let env: TestEnv;
const T0 = Date.now() - 3 * DAY_MS;

beforeAll(async () => {
  env = await startTestEnv();
}, 120_000);
afterAll(async () => {
  await env?.close();
});

async function written(agentId: string): Promise<string[]> {
  const { entries } = await env.client.write({
    agentId,
    entries: MEMORIES.map((text, i) => ({ text, writtenAt: T0 + i })),
  });
  const ids = entries.map((e) => e.id);
  await untilEmbedded(env.store, agentId, ids);
  return ids;
}

describe('vector records that do not fit', () => {
  it('skips and counts unusable vectors, and still finds the rest by meaning', async () => {
    const agentId = env.agent('bad-vectors');
    const ids = await written(agentId);
    const floats = (values: number[]) => new Binary(Buffer.from(Float32Array.from(values).buffer));
    const dims = env.config.embeddingsDimensions;
    const broken = [
      floats(Array.from({ length: dims }, (_, i) => (i === 0 ? Number.NaN : 0.05))),
      floats(new Array<number>(dims).fill(0)),
      floats(new Array<number>(dims - 1).fill(0.05)),
    ];
    // Record by record, as a faulty writer leaves them; the dimensions it claims are right.
    for (const [i, vector] of broken.entries()) {
      await env.store.vectors.updateOne(
        { _id: ids[3 + i]!, agentId },
        { $set: { vector, dimensions: dims } },
      );
    }
    // A process that has not held the agent's index: it loads every record.
    const fresh = await MemgateClient.connect(env.config, env.endpoints);
    try {
      const res = await fresh.recall({ agentId, query: PARAPHRASE });
      expect(res.retrieval).toMatchObject({ mode: 'hybrid', badVectors: 3, otherModelVectors: 0 });
      expect(res.hits[0]).toMatchObject({ id: ids[0], foundBy: 'semantic' });
      // Their entries are still found by their words.
      const byWords = await fresh.recall({ agentId, query: 'dentist appointment Friday' });
      expect(byWords.hits[0]).toMatchObject({ id: ids[4], foundBy: 'lexical' });
    } finally {
      await fresh.close();
    }
  }, 180_000);

  it('takes a change of dimensions under the same model for another space, which reembed converts', async () => {
    const agentId = env.agent('dimensions');
    const ids = await written(agentId);
    const larger = env.config.embeddingsDimensions + 128;
    const proxy = await paddedEmbeddings(inject('embeddingsQueryUrls')[0]!, larger);
    await env.stopWorker();
    const next = await startTestEnv(
      {
        MEMGATE_DB: env.config.database,
        MEMGATE_TASK_QUEUE: env.config.taskQueue,
        MEMGATE_EMBEDDINGS_DIMENSIONS: String(larger),
      },
      { embeddings: { queryUrls: [proxy.url], passagesUrl: proxy.url } },
    );
    try {
      const before = await next.client.recall({ agentId, query: PARAPHRASE });
      expect(before.retrieval).toMatchObject({
        mode: 'hybrid',
        otherModelVectors: ids.length,
        badVectors: 0,
      });

      const result = await next.client.reembed({ agentId });
      expect(result).toMatchObject({ agentId, marked: ids.length, embedded: ids.length });
      const records = await next.store.vectors.find({ agentId }).toArray();
      expect(records.map((r) => [r.dimensions, r.vector!.buffer.length / 4])).toEqual(
        ids.map(() => [larger, larger]),
      );

      const after = await next.client.recall({ agentId, query: PARAPHRASE });
      expect(after.retrieval).toMatchObject({ mode: 'hybrid', otherModelVectors: 0, badVectors: 0 });
      expect(after.hits[0]).toMatchObject({ id: ids[0], foundBy: 'semantic' });
    } finally {
      await env.restartWorker();
      await next.close();
      await proxy.close();
    }
  }, 180_000);
});
