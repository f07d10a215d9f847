/**
 * Tenant against tenant: one API key floods `memgate serve` with expensive deep recalls and
 * long queries while another tenant writes and recalls at a steady pace. The flood comes from
 * autocannon (a maintained load generator: connection reuse, precise latency histograms,
 * bounded by time, loopback only); the calm tenant's calls are timed one by one.
 *
 * The serving process is the one `memgate start` runs: the HTTP API and a worker in one
 * process, so the flood competes with write acknowledgements and heartbeats for its event loop.
 *
 *   npm run bench -- load
 *
 * Prints the calm tenant's recall and write-acknowledgement p99, idle and under the flood, in
 * the same run (with an embeddings endpoint, also how long its queries took to embed); the serving process's event-loop delay p99 under the flood; and the share of
 * the flood answered 429.
 */
import autocannon from 'autocannon';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startHttpServer } from '../cli/commands/serve';
import { createKey } from '../store/keys';
import { hotAwaitingEmbedding } from '../store/vectors';
import { emit, percentile, round, startBenchEnv } from './support';

/**
 * How long the flood lasts; the calm tenant's phases take about as long each. A minute gives
 * each phase 240 recalls, so a p99 is the third slowest of them, not one call's luck.
 */
const FLOOD_SECONDS = 60;
const FLOOD_CONNECTIONS = 32;
/** The calm tenant's pace: a write and a recall every PACE_MS, well within its rate limit. */
const PACE_MS = 250;
const CALM_ROUNDS = Math.floor((FLOOD_SECONDS * 1000) / PACE_MS);
/** Untimed rounds before the idle figures: the calm agent's first recalls load what it reads. */
const WARM_UP_ROUNDS = 20;
/** The flooder's agent: big entries, so a deep recall over them is the expensive kind. */
const FLOOD_ENTRIES = 300;
const FLOOD_TEXT_CHARS = 4_000;

const BARS = { recallP99Ratio: 2, writeAckP99Ratio: 2, eventLoopDelayP99Ms: 50 };

const words = ['harbour', 'ledger', 'invoice', 'pallet', 'customs', 'tariff', 'berth', 'manifest'];
const longText = (i: number) =>
  Array.from({ length: FLOOD_TEXT_CHARS / 8 }, (_, j) => words[(i * 7 + j) % words.length]).join(' ');
/**
 * A long query of many distinct single characters, about as long as a query may be (3,999 of
 * 4,000 characters, 2,000 distinct terms): the costly shape for the lexical arm, and for the
 * model that embeds it.
 */
const longQuery = Array.from({ length: 2_000 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join(' ');

/**
 * `--lexical` runs it with no embeddings endpoint: the HTTP API and the store alone. With one
 * (the default), every recall of either tenant also embeds its query on the one shared server.
 */
const LEXICAL = process.argv.includes('--lexical');

async function main(): Promise<void> {
  const env = await startBenchEnv(
    // Recall as served: it waits the default time for an index, not the benchmarks' longest.
    { MEMGATE_RECALL_INDEX_WAIT_MS: '2000' },
    LEXICAL ? { embeddings: { unavailable: 'the load benchmark ran with --lexical' } } : {},
  );
  // The server `memgate serve` runs, with its limits (MEMGATE_HTTP_RATE_LIMIT,
  // MEMGATE_HTTP_IN_FLIGHT_PER_KEY), on a port of its own.
  const server = await startHttpServer(env.client, env.config, { port: 0 });
  try {
    const base = server.url;
    const flooder = `flood-${env.runId}`;
    const calm = `calm-${env.runId}`;
    const floodKey = (await createKey(env.client.store, `${flooder}*`, Date.now())).key;
    const calmKey = (await createKey(env.client.store, `${calm}*`, Date.now())).key;

    const call = async (key: string, path: string, body: unknown): Promise<number> =>
      (await timedCall(key, path, body)).ms;
    const timedCall = async (key: string, path: string, body: unknown) => {
      const started = performance.now();
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const answer = await res.text();
      if (!res.ok) throw new Error(`${path} answered ${res.status}`);
      return { ms: performance.now() - started, answer };
    };

    console.error(`seeding ${FLOOD_ENTRIES} entries of ${FLOOD_TEXT_CHARS} characters for the flooder`);
    for (let i = 0; i < FLOOD_ENTRIES; i += 50) {
      const entries = Array.from({ length: 50 }, (_, j) => ({ text: longText(i + j) }));
      await call(floodKey, `/v1/agents/${flooder}/memories`, { entries });
    }
    for (let i = 0; i < 40; i++) {
      await call(calmKey, `/v1/agents/${calm}/memories`, {
        entries: [{ text: `Order ${i} left berth ${i % 7} with ${i * 3} pallets.` }],
      });
    }

    /** The calm tenant: a write and a recall every PACE_MS, each timed. */
    const calmPhase = async (phase: string, rounds = CALM_ROUNDS) => {
      const writes: number[] = [];
      const recalls: number[] = [];
      /** Of each hybrid recall, the time its query took to embed (part of `recalls`). */
      const queryEmbeddings: number[] = [];
      /** Why recalls were answered lexically: a hybrid recall that could not be. */
      const lexical: Record<string, number> = {};
      for (let round = 0; round < rounds; round++) {
        const due = performance.now() + PACE_MS;
        const [w, r] = await Promise.all([
          call(calmKey, `/v1/agents/${calm}/memories`, {
            entries: [{ text: `${phase} note ${round}: the customs form for berth ${round % 7} is filed.` }],
          }),
          timedCall(calmKey, `/v1/agents/${calm}/recall`, { query: `pallets at berth ${round % 7}` }),
        ]);
        writes.push(w);
        recalls.push(r.ms);
        const { retrieval } = JSON.parse(r.answer) as {
          retrieval: { mode: string; reason?: string; queryEmbeddingMs?: number };
        };
        if (retrieval.queryEmbeddingMs !== undefined) queryEmbeddings.push(retrieval.queryEmbeddingMs);
        if (!LEXICAL && retrieval.mode === 'lexical') {
          const reason = retrieval.reason ?? 'none given';
          lexical[reason] = (lexical[reason] ?? 0) + 1;
        }
        const wait = due - performance.now();
        if (wait > 0) await new Promise((done) => setTimeout(done, wait));
      }
      const p99 = (xs: number[]) =>
        round(
          percentile(
            [...xs].sort((a, b) => a - b),
            99,
          ),
          1,
        );
      const p50 = (xs: number[]) =>
        round(
          percentile(
            [...xs].sort((a, b) => a - b),
            50,
          ),
          1,
        );
      return {
        calls: writes.length + recalls.length,
        recallP50Ms: p50(recalls),
        recallP99Ms: p99(recalls),
        ...(queryEmbeddings.length > 0 && {
          queryEmbeddingP50Ms: p50(queryEmbeddings),
          queryEmbeddingP99Ms: p99(queryEmbeddings),
        }),
        writeAckP50Ms: p50(writes),
        writeAckP99Ms: p99(writes),
        ...(Object.keys(lexical).length > 0 && { answeredLexically: lexical }),
      };
    };

    // The idle figures are of a settled system: the seeds embedded (with an endpoint), and the
    // calm tenant past its first calls.
    if (!LEXICAL) {
      console.error('embedding the seeds');
      for (const agentId of [flooder, calm]) {
        while (await hotAwaitingEmbedding(env.client.store, agentId))
          await new Promise((r) => setTimeout(r, 500));
      }
    }
    await calmPhase('warm-up', WARM_UP_ROUNDS);
    console.error('calm tenant alone');
    const idle = await calmPhase('idle');

    console.error(`flood: ${FLOOD_CONNECTIONS} connections for ${FLOOD_SECONDS} s, beside the calm tenant`);
    const headers = { authorization: `Bearer ${floodKey}`, 'content-type': 'application/json' };
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const flood = autocannon({
      // In a thread of its own: the flood's own work is not on the serving process's event loop.
      workers: 1,
      url: base,
      connections: FLOOD_CONNECTIONS,
      duration: FLOOD_SECONDS,
      requests: [
        {
          method: 'POST',
          path: `/v1/agents/${flooder}/recall`,
          headers,
          body: JSON.stringify({ query: 'harbour ledger invoice pallet customs', deep: true, k: 50 }),
        },
        {
          method: 'POST',
          path: `/v1/agents/${flooder}/recall`,
          headers,
          body: JSON.stringify({ query: longQuery, deep: true, k: 50 }),
        },
      ],
    });
    const [underFlood, floodResult] = await Promise.all([calmPhase('flood'), flood]);
    delay.disable();

    const floodRequests = floodResult.requests.total;
    // By status: a flood answered 400 would test nothing.
    const answered = Object.fromEntries(
      Object.entries(floodResult.statusCodeStats as Record<string, { count: number }>).map(
        ([code, { count }]) => [code, count],
      ),
    );
    const result = {
      benchmark: 'load',
      retrieval: LEXICAL ? 'lexical' : 'hybrid',
      floodSeconds: FLOOD_SECONDS,
      floodConnections: FLOOD_CONNECTIONS,
      rateLimitPerMinute: env.config.httpRateLimit,
      inFlightPerKey: env.config.httpInFlightPerKey,
      idle,
      underFlood: { ...underFlood, eventLoopDelayP99Ms: round(delay.percentile(99) / 1e6, 1) },
      flood: {
        requests: floodRequests,
        answered,
        rateLimitedShare: round((answered['429'] ?? 0) / Math.max(1, floodRequests), 3),
        errors: floodResult.errors,
        timeouts: floodResult.timeouts,
      },
      ratios: {
        recallP99: round(underFlood.recallP99Ms / idle.recallP99Ms, 2),
        writeAckP99: round(underFlood.writeAckP99Ms / idle.writeAckP99Ms, 2),
      },
      bars: BARS,
    };
    emit({
      ...result,
      met: {
        recallP99: result.ratios.recallP99 <= BARS.recallP99Ratio,
        writeAckP99: result.ratios.writeAckP99 <= BARS.writeAckP99Ratio,
        eventLoopDelayP99: result.underFlood.eventLoopDelayP99Ms <= BARS.eventLoopDelayP99Ms,
      },
    });
  } finally {
    await server.close();
    await env.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
