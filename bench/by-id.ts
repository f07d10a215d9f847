/**
 * Reads of many documents by `_id`: k point reads side by side, as store/ read neighbours,
 * document frequencies and content keys before, against one `findByIds` (store/byIds.ts), on a
 * collection of BENCH_BY_ID_DOCS entries of about 1 KB. Run alone on the machine; prints JSON.
 */
import type { Entry } from '../core/entry';
import { findByIds } from '../store/byIds';
import { findById } from '../store/tiers';
import { emit, percentile, round, startBenchEnv } from './support';

const DOCS = Number(process.env.BENCH_BY_ID_DOCS ?? 50_000);
const ROUNDS = 100;
const AGENT = 'bench-by-id';

async function main(): Promise<void> {
  const env = await startBenchEnv();
  try {
    const collection = env.client.store.hot;
    const idOf = (i: number) => `by-id-${i.toString(36).padStart(6, '0')}`;
    const text = 'figure '.repeat(150);
    for (let i = 0; i < DOCS; i += 5_000) {
      const docs = Array.from({ length: Math.min(5_000, DOCS - i) }, (_, j) => ({
        _id: idOf(i + j),
        agentId: AGENT,
        text,
      }));
      await collection.insertMany(docs as unknown as Entry[]);
    }
    const sizes = [];
    for (const k of [10, 100]) {
      const pointMs: number[] = [];
      const oneReadMs: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const ids = [...new Set(Array.from({ length: k }, () => idOf(Math.floor(Math.random() * DOCS))))];
        let started = performance.now();
        const one = await Promise.all(ids.map((id) => findById(collection, AGENT, id)));
        pointMs.push(performance.now() - started);
        started = performance.now();
        const many = await findByIds(collection, ids);
        oneReadMs.push(performance.now() - started);
        if (one.some((d) => d === undefined) || many.size !== ids.length)
          throw new Error(
            `round ${r}: ${ids.length} ids, point reads found ${one.filter(Boolean).length}, one read ${many.size}`,
          );
      }
      pointMs.sort((a, b) => a - b);
      oneReadMs.sort((a, b) => a - b);
      sizes.push({
        ids: k,
        pointReadsP50Ms: round(percentile(pointMs, 50), 1),
        pointReadsP99Ms: round(percentile(pointMs, 99), 1),
        oneReadP50Ms: round(percentile(oneReadMs, 50), 1),
        oneReadP99Ms: round(percentile(oneReadMs, 99), 1),
      });
    }
    emit({ benchmark: 'by-id', documents: DOCS, rounds: ROUNDS, sizes });
  } finally {
    await env.close();
  }
}

void main();
