/**
 * Recall latency for one agent as its store grows: default (gated) recall over N hot entries,
 * and deep recall over the same N hot entries plus N cold ones. Sizes: BENCH_RECALL_SIZES
 * (default "10000,50000,250000"); BENCH_RECALL_QUERIES queries per size and mode (default
 * 200: the p99 of 50 would be their worst but one).
 *
 * The store is loaded as a nightly run leaves it: entries inserted in bulk (this measures
 * reads, not writes) and their terms counted into the document frequencies. Each query names
 * a subject (held by a tenth of the store), one of 2,500 topics (about a hundred entries
 * each at 250,000) and the word "figure", which every entry holds.
 *
 * Hybrid recall (lexical and nearest neighbours by embedding, fused) is measured beside it on
 * the same store: each entry has a vector, as the agent's workflow leaves it, with its
 * entry's recall state (tier, gate, salience). Embedding half a million entries would take
 * this machine days, so the vectors are real embeddings of LongMemEval turns
 * (BENCH_RECALL_BASE_VECTORS of them, embedded once and cached) each perturbed by Gaussian
 * noise to a cosine of about 0.9 with its original: the clustered shape of real text's
 * embeddings, at the bench's scale. A hybrid query is one of those turns (of at most
 * QUERY_CHARS), so about one entry in 2,000 of each tier are its true neighbours, standing
 * far above its background (core/hybrid.ts); the same queries are timed lexically too. The
 * queries are embedded by the real embeddings server, and that time is reported apart.
 *
 * Per size, beside the latencies: the first hybrid recall's index load from the store
 * (`indexLoadS`, in the vector engine's thread), the event loop's delay
 * (`monitorEventLoopDelay`) while it loads and while BENCH_RECALL_GROW more entries land and
 * are read in, and a fresh `memgate recall` process's time from its start to its answer, once
 * right after the growth (the changes since the persisted index read from the feed) and once
 * the serving process has saved it (`SAVE_DELAY_MS` after a change, at a pause in its
 * searches: core/indexSaves.ts).
 *
 * Prints {"sizes":[{"entries","p50Ms","p99Ms","deepP99Ms","candidatesPerQuery","hybrid":{...}}],
 * "growthExponent","hybridGrowthExponent"}, the exponents being the log-log slopes of default
 * p99 between the smallest and largest size.
 */
import { buildEntry, memoryPolicy, type Entry, type Tier } from '../core/entry';
import { DAY_MS } from '../core/salience';
import { entryId } from '../core/ids';
import { settledEntry } from '../store/entries';
import { adjustDocumentFrequencies } from '../store/terms';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { MemgateClient } from '../client/client';
import type { RecallResult } from '../store/recall';
import { SAVE_DELAY_MS } from '../store/vectorIndexes';
import { SAVE_QUIET_MS } from '../core/indexSaves';
import { emit, growthExponent, percentile, round, startBenchEnv } from './support';
import { baseVectors, prng, vectorRecords } from './vectors';

const run = promisify(execFile);
const SIZES = (process.env.BENCH_RECALL_SIZES ?? '10000,50000,250000').split(',').map(Number);
const QUERIES = Number(process.env.BENCH_RECALL_QUERIES ?? 200);
const BATCH = 1000;
/** Entries (half hot, half cold) that land after the index has loaded: its growth, measured. */
const GROW = Number(process.env.BENCH_RECALL_GROW ?? 10_000) / 2;
/** The longest base text a query by meaning may be: about a question's length. */
const QUERY_CHARS = 160;

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

async function main() {
  const env = await startBenchEnv();
  const bases = await baseVectors(env, 'recall');
  const embeddings = env.endpoints.embeddings as { queryUrls: string[]; passagesUrl: string };
  const texts = bases.texts;
  // The lexical arm: the same store and queries, with no embeddings endpoint.
  const lexical = await MemgateClient.connect(env.config, {
    ...env.endpoints,
    embeddings: { unavailable: 'the lexical arm of the benchmark' },
  });
  let seq = 0;
  /** Vector records for the entries, as the agent's workflow leaves them, and the feed counter. */
  async function vectorsFor(entries: { entry: Entry; tier: Tier }[]) {
    await store.vectors.insertMany(vectorRecords(bases, agentId, entries, seq + 1, now), { ordered: false });
    seq += entries.length;
    await store.vectorFeeds.updateOne({ _id: agentId }, { $set: { seq } }, { upsert: true });
  }
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
    return settledEntry(
      buildEntry(entryId(agentId, { idempotencyKey: String(i) }), agentId, input, policy),
      now,
    );
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
      await vectorsFor([
        ...hot.map((entry) => ({ entry, tier: 'hot' as const })),
        ...cold.map((entry) => ({ entry, tier: 'cold' as const })),
      ]);
      for (const e of [...hot, ...cold]) termLists.push(e.terms);
    }
    await adjustDocumentFrequencies(store, agentId, termLists, 1);
  }

  /**
   * Latencies of QUERIES recalls; a hybrid recall's exclude the query's embedding, which is
   * reported apart (the embeddings server's time, whatever the store's size).
   */
  async function measure(client: MemgateClient, deep: boolean, byMeaning = false) {
    const latencies: number[] = [];
    const embedding: number[] = [];
    let candidates = 0;
    let semantic = 0;
    for (let q = 0; q < QUERIES; q++) {
      const query = byMeaning
        ? meaningQuery(q)
        : `${SUBJECTS[q % SUBJECTS.length]} topic${(q * 37) % TOPICS} figure`;
      const s = performance.now();
      const res = await client.recall({ agentId, query, k: 10, deep });
      const embedMs = res.retrieval.mode === 'hybrid' ? res.retrieval.queryEmbeddingMs : 0;
      latencies.push(performance.now() - s - embedMs);
      embedding.push(embedMs);
      candidates += res.candidates;
      semantic += res.hits.filter((h) => h.foundBy !== 'lexical').length;
    }
    latencies.sort((a, b) => a - b);
    embedding.sort((a, b) => a - b);
    return {
      latencies,
      embedding,
      candidatesPerQuery: candidates / QUERIES,
      semanticPerQuery: semantic / QUERIES,
    };
  }

  /**
   * A query with true neighbours: a base text (one of those no longer than a question),
   * whose embedding each of its entries' vectors is near.
   */
  const short = texts.filter((t) => t.length <= QUERY_CHARS);
  const meaningQuery = (q: number) => short[(q * 41) % short.length]!;

  /** The event loop's delay from now until `stop`, p99 and max in ms. */
  function loopDelay() {
    const h = monitorEventLoopDelay({ resolution: 5 });
    h.enable();
    return {
      stop: () => {
        h.disable();
        return { p99Ms: round(h.percentile(99) / 1e6), maxMs: round(h.max / 1e6) };
      },
    };
  }

  /**
   * `memgate recall` in a new process, on this bench's store and index directory: the time
   * from its start to its answer (wall clock, its exit included), and the part of it spent
   * embedding the query and, once per process, the reference passages.
   */
  async function firstAnswerInFreshProcess(query: string) {
    const started = performance.now();
    const { stdout } = await run(
      process.execPath,
      [join(__dirname, '..', 'bin', 'memgate.cjs'), 'recall', '-a', agentId, query],
      {
        env: {
          ...process.env,
          MEMGATE_DB: env.config.database,
          MEMGATE_VECTOR_INDEX_DIR: env.config.vectorIndexDir,
          TEMPORAL_ADDRESS: env.endpoints.temporalAddress,
          MONGODB_URI: env.endpoints.mongoUri,
          MEMGATE_EMBEDDINGS_URL: embeddings.queryUrls.join(','),
          MEMGATE_EMBEDDINGS_PASSAGES_URL: embeddings.passagesUrl,
        },
      },
    );
    const ms = performance.now() - started;
    const { retrieval } = JSON.parse(stdout) as RecallResult;
    const embeddingMs = retrieval.mode === 'hybrid' ? retrieval.queryEmbeddingMs : 0;
    return {
      processStartToAnswerMs: round(ms, 0),
      embeddingMs: round(embeddingMs, 0),
      withoutEmbeddingMs: round(ms - embeddingMs, 0),
      mode: retrieval.mode,
    };
  }

  const sizes = [];
  try {
    for (const size of SIZES) {
      const t0 = performance.now();
      await load(size - loaded / 2);
      console.error(
        `[recall] ${size} hot + ${size} cold loaded in ${round((performance.now() - t0) / 1000, 1)} s`,
      );
      await measure(lexical, false); // warm the caches of both servers once per size
      const gated = await measure(lexical, false);
      const deep = await measure(lexical, true);
      // The first hybrid recall loads the agent's index from the store: timed on its own,
      // and the event loop's delay watched while the engine thread builds it.
      const whileLoading = loopDelay();
      const l0 = performance.now();
      await env.client.recall({ agentId, query: meaningQuery(0), k: 10 });
      const indexLoadS = (performance.now() - l0) / 1000;
      const loadDelay = whileLoading.stop();
      // The index grows: GROW more entries and vectors land, and a recall reads them in.
      const whileGrowing = loopDelay();
      await load(GROW);
      await env.client.recall({ agentId, query: meaningQuery(1), k: 10 });
      const growDelay = whileGrowing.stop();
      // A process that starts now opens the index the load persisted and reads the GROW
      // changes since from the feed: this one saves them only SAVE_DELAY_MS after.
      const behind = await firstAnswerInFreshProcess(meaningQuery(2));
      await measure(env.client, false, true);
      const hybrid = await measure(env.client, false, true);
      const hybridDeep = await measure(env.client, true, true);
      // The same queries, lexical only: what the semantic part adds to them.
      const lexicalSame = await measure(lexical, false, true);
      // One that starts once the index is saved current (SAVE_DELAY_MS after a change, at a
      // pause in the searches) opens it current.
      await new Promise((r) => setTimeout(r, SAVE_DELAY_MS + SAVE_QUIET_MS + 5_000));
      const current = await firstAnswerInFreshProcess(meaningQuery(3));
      sizes.push({
        entries: size,
        p50Ms: round(percentile(gated.latencies, 50)),
        p99Ms: round(percentile(gated.latencies, 99)),
        deepP99Ms: round(percentile(deep.latencies, 99)),
        candidatesPerQuery: round(gated.candidatesPerQuery, 1),
        deepCandidatesPerQuery: round(deep.candidatesPerQuery, 1),
        hybrid: {
          p50Ms: round(percentile(hybrid.latencies, 50)),
          p99Ms: round(percentile(hybrid.latencies, 99)),
          deepP99Ms: round(percentile(hybridDeep.latencies, 99)),
          queryEmbeddingP50Ms: round(percentile(hybrid.embedding, 50)),
          queryEmbeddingP99Ms: round(percentile(hybrid.embedding, 99)),
          candidatesPerQuery: round(hybrid.candidatesPerQuery, 1),
          semanticHitsPerQuery: round(hybrid.semanticPerQuery, 1),
          indexLoadS: round(indexLoadS, 1),
          vectors: loaded,
          lexicalSameQueriesP99Ms: round(percentile(lexicalSame.latencies, 99)),
          eventLoopDelay: { whileLoading: loadDelay, whileGrowing: growDelay },
          firstAnswer: { current, behind: { ...behind, changesBehind: 2 * GROW } },
        },
      });
      console.error(`[recall] ${JSON.stringify(sizes[sizes.length - 1])}`);
    }
    emit({
      bench: 'recall',
      server: env.config.mongoUri ? 'configured' : 'local stack (FerretDB 1.24 on PostgreSQL 16)',
      queriesPerSize: QUERIES,
      sizes,
      growthExponent: growthExponent(sizes, (s) => s.p99Ms),
      hybridGrowthExponent: growthExponent(sizes, (s) => s.hybrid.p99Ms),
      vectors: `real embeddings of ${bases.vectors.length} LongMemEval user turns (${bases.model}), each entry's perturbed to cosine ≈ 0.9`,
      rssMb: round(process.memoryUsage().rss / 2 ** 20, 0),
    });
  } finally {
    await lexical.close();
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
