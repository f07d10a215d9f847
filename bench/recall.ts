/**
 * Recall latency for one agent as its store grows: default (gated) recall over N hot entries,
 * and deep recall over the same N hot entries plus N cold ones. Sizes: BENCH_RECALL_SIZES
 * (default "10000,50000,250000"); BENCH_RECALL_QUERIES queries per size and mode (default 50).
 *
 * The store is loaded as a nightly run leaves it: entries inserted in bulk (this measures
 * reads, not writes) and their terms counted into the document frequencies. Each query names
 * a subject (held by a tenth of the store), one of 2,500 topics (about a hundred entries
 * each at 250,000) and the word "figure", which every entry holds.
 *
 * Prints {"sizes":[{"entries","p50Ms","p99Ms","deepP99Ms","candidatesPerQuery"}],"growthExponent"},
 * the exponent being the log-log slope of default p99 between the smallest and largest size.
 */
import { buildEntry, memoryPolicy, type Entry } from '../core/entry';
import { DAY_MS } from '../core/salience';
import { entryId, indexedEntry } from '../store/entries';
import { adjustDocumentFrequencies } from '../store/terms';
import { emit, growthExponent, percentile, round, startBenchEnv } from './support';

const SIZES = (process.env.BENCH_RECALL_SIZES ?? '10000,50000,250000').split(',').map(Number);
const QUERIES = Number(process.env.BENCH_RECALL_QUERIES ?? 50);
const BATCH = 1000;

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
const TOPICS = 2500;

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
  const store = env.client.store;
  const agentId = `recall-${env.runId}`;
  const now = Date.now();
  const rand = prng(42);
  let loaded = 0;

  function entry(i: number): Entry {
    const text =
      `The ${SUBJECTS[i % SUBJECTS.length]} note about topic${Math.floor(rand() * TOPICS)} says the ` +
      `figure is ${Math.floor(rand() * 1000)} units, reviewed by team ${Math.floor(rand() * 50)}.`;
    const input = {
      text,
      kind: 'episode' as const,
      salience: 0.05 + rand() * 0.95,
      source: { origin: 'agent' as const },
      confidence: 0.5,
      verified: false,
      volatile: false,
      writtenAt: now - Math.floor(rand() * 30 * DAY_MS),
    };
    const e = indexedEntry(
      buildEntry(entryId(agentId, { idempotencyKey: String(i) }), agentId, input, policy),
    );
    // As the nights before left it: counted, and out of default recall's postings once dormant.
    delete e.pending;
    if (e.dormantAt <= now) delete e.liveKeys;
    return e;
  }

  /** `count` more entries in each tier, and their terms in the document frequencies. */
  async function load(count: number) {
    const termLists: string[][] = [];
    for (let done = 0; done < count; done += BATCH) {
      const n = Math.min(BATCH, count - done);
      const hot = Array.from({ length: n }, () => entry(loaded++));
      const cold = Array.from({ length: n }, () => ({ ...entry(loaded++), spilledAt: now }));
      await store.hot.insertMany(hot, { ordered: false });
      await store.cold.insertMany(cold, { ordered: false });
      for (const e of [...hot, ...cold]) termLists.push(e.terms);
    }
    await adjustDocumentFrequencies(store, agentId, termLists, 1);
  }

  async function measure(deep: boolean) {
    const latencies: number[] = [];
    let candidates = 0;
    for (let q = 0; q < QUERIES; q++) {
      const query = `${SUBJECTS[q % SUBJECTS.length]} topic${(q * 37) % TOPICS} figure`;
      const s = performance.now();
      const res = await env.client.recall({ agentId, query, k: 10, deep });
      latencies.push(performance.now() - s);
      candidates += res.candidates;
    }
    latencies.sort((a, b) => a - b);
    return { latencies, candidatesPerQuery: candidates / QUERIES };
  }

  const sizes = [];
  try {
    for (const size of SIZES) {
      const t0 = performance.now();
      await load(size - loaded / 2);
      console.error(
        `[recall] ${size} hot + ${size} cold loaded in ${round((performance.now() - t0) / 1000, 1)} s`,
      );
      await measure(false); // warm the caches of both servers once per size
      const gated = await measure(false);
      const deep = await measure(true);
      sizes.push({
        entries: size,
        p50Ms: round(percentile(gated.latencies, 50)),
        p99Ms: round(percentile(gated.latencies, 99)),
        deepP99Ms: round(percentile(deep.latencies, 99)),
        candidatesPerQuery: round(gated.candidatesPerQuery, 1),
        deepCandidatesPerQuery: round(deep.candidatesPerQuery, 1),
      });
      console.error(`[recall] ${JSON.stringify(sizes[sizes.length - 1])}`);
    }
    emit({
      bench: 'recall',
      server: env.config.mongoUri ? 'configured' : 'local stack (FerretDB 1.24 on PostgreSQL 16)',
      queriesPerSize: QUERIES,
      sizes,
      growthExponent: growthExponent(sizes, (s) => s.p99Ms),
    });
  } finally {
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
