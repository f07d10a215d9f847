/**
 * Default (gated) recall latency for one agent at 10k and 100k entries, with the number of
 * documents the server examines per query and the candidates handed to the ranker. Entries
 * are loaded with insertMany (this measures reads, not writes). Sizes: BENCH_RECALL_SIZES
 * (default "10000,100000"), BENCH_RECALL_QUERIES (queries per size, default 12).
 */
import { buildEntry, memoryPolicy } from '../core/entry';
import { DAY_MS } from '../core/salience';
import { terms } from '../core/text';
import { entryId, explainCandidateScan } from '../store/entries';
import { emit, percentile, round, startBenchEnv } from './support';

const SIZES = (process.env.BENCH_RECALL_SIZES ?? '10000,100000').split(',').map(Number);
const QUERIES = Number(process.env.BENCH_RECALL_QUERIES ?? 12);

const SUBJECTS = [
  'supplier',
  'invoice',
  'deploy',
  'customer',
  'contract',
  'budget',
  'incident',
  'roadmap',
  'hiring',
  'vendor',
];
const TOPICS = Array.from({ length: 400 }, (_, i) => `topic${i}`);

/** Deterministic pseudo-random numbers, so every run loads the same store. */
function prng(seed: number) {
  return () => {
    seed = (seed * 1664525 + 1013904223) >>> 0;
    return seed / 2 ** 32;
  };
}

async function main() {
  const env = await startBenchEnv();
  const policy = memoryPolicy(env.config);
  const results = [];
  try {
    let loaded = 0;
    const agentId = `recall-${env.runId}`;
    const now = Date.now();
    const rand = prng(42);
    for (const size of SIZES) {
      const t0 = performance.now();
      while (loaded < size) {
        const batch = [];
        for (let i = 0; i < 1000 && loaded < size; i++, loaded++) {
          const text =
            `The ${SUBJECTS[loaded % SUBJECTS.length]} note ${loaded} about ${TOPICS[Math.floor(rand() * TOPICS.length)]} ` +
            `says the figure is ${Math.floor(rand() * 1000)} units, reviewed by team ${Math.floor(rand() * 50)}.`;
          const writtenAt = now - Math.floor(rand() * 30 * DAY_MS);
          const input = {
            text,
            kind: 'episode' as const,
            salience: 0.05 + rand() * 0.95,
            source: { origin: 'agent' as const },
            confidence: 0.5,
            verified: false,
            volatile: false,
            writtenAt,
          };
          batch.push(
            buildEntry(entryId(agentId, { idempotencyKey: String(loaded) }), agentId, input, policy),
          );
        }
        await env.client.store.hot.insertMany(batch, { ordered: false });
      }
      const loadSeconds = (performance.now() - t0) / 1000;
      const latencies: number[] = [];
      let candidates = 0;
      let hits = 0;
      for (let q = 0; q < QUERIES; q++) {
        const query = `${SUBJECTS[q % SUBJECTS.length]} ${TOPICS[(q * 37) % TOPICS.length]} figure`;
        const s = performance.now();
        const res = await env.client.recall({ agentId, query, k: 10 });
        latencies.push(performance.now() - s);
        hits += res.hits.length;
        candidates += res.candidates;
      }
      latencies.sort((a, b) => a - b);
      const scan = await explainCandidateScan(env.client.store, {
        agentId,
        terms: terms('supplier topic1 figure'),
        now: Date.now(),
        deep: false,
      });
      results.push({
        entries: size,
        queries: QUERIES,
        latencyMs: { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)) },
        docsExaminedPerQuery: scan.docsExamined,
        docsExaminedSource: scan.source,
        candidatesRankedPerQuery: round(candidates / QUERIES, 1),
        hitsPerQuery: round(hits / QUERIES, 1),
        loadSeconds: round(loadSeconds, 1),
      });
      console.error(`[recall] ${size} entries done`);
    }
    emit({
      bench: 'recall',
      server: env.config.mongoUri ? 'configured' : 'local stack (FerretDB/SQLite)',
      results,
    });
  } finally {
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
