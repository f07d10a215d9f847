/**
 * The same N entries written (a) through the durable write path (Update-with-start into each
 * agent's workflow, one entry per Update) by 16 concurrent agents and (b) with the driver's
 * insertMany straight into the same server; plus the acknowledgement latency of single-entry
 * writes on an idle agent. Sizes: BENCH_WRITE_N (default 4000), BENCH_AGENTS (16),
 * BENCH_INFLIGHT (writes in flight per agent, one run per level, default "8,32"),
 * BENCH_SEQUENTIAL (300). Concurrent writes of one agent are coalesced by the client, so
 * more writes in flight means more entries per Update.
 */
import { buildEntry, memoryPolicy } from '../core/entry';
import { entryId, indexedEntry } from '../store/entries';
import { emit, percentile, round, startBenchEnv } from './support';

const N = Number(process.env.BENCH_WRITE_N ?? 4000);
const AGENTS = Number(process.env.BENCH_AGENTS ?? 16);
const INFLIGHT_LEVELS = (process.env.BENCH_INFLIGHT ?? '8,32').split(',').map(Number);
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 300);

function text(agent: number, i: number): string {
  return `Agent ${agent} observation ${i}: the build on branch feature-${i % 97} took ${(i * 7) % 300} seconds on runner ${i % 13}.`;
}

async function main() {
  const env = await startBenchEnv();
  try {
    const agents = Array.from({ length: AGENTS }, (_, a) => `writer-${a}-${env.runId}`);
    // Start every agent's workflow first so (a) measures steady-state writes, not first starts.
    await Promise.all(
      agents.map((agentId) =>
        env.client.write({ agentId, entries: [{ text: 'warm-up', idempotencyKey: 'warm' }] }),
      ),
    );

    const perAgent = Math.ceil(N / AGENTS);
    const written = perAgent * AGENTS;
    const durable = [];
    for (const inflight of INFLIGHT_LEVELS) {
      const latencies: number[] = [];
      const t0 = performance.now();
      await Promise.all(
        agents.map(async (agentId, a) => {
          let next = 0;
          const lane = async () => {
            while (next < perAgent) {
              const i = next++;
              const s = performance.now();
              const key = `w-${inflight}-${i}`;
              await env.client.write({ agentId, entries: [{ text: text(a, i), idempotencyKey: key }] });
              latencies.push(performance.now() - s);
            }
          };
          await Promise.all(Array.from({ length: inflight }, lane));
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      latencies.sort((x, y) => x - y);
      durable.push({ inflightPerAgent: inflight, seconds, latencies });
      console.error(
        `[write-path] ${written} entries with ${inflight} in flight per agent: ${round(seconds, 1)} s`,
      );
    }

    // (b) the same entries, built the same way, inserted directly by 16 concurrent writers.
    const policy = memoryPolicy(env.config);
    const now = Date.now();
    const batches = agents.map((agentId, a) =>
      Array.from({ length: perAgent }, (_, i) => {
        const t = text(a, i);
        return buildEntry(
          entryId(`direct-${agentId}`, { idempotencyKey: `w-${i}` }),
          `direct-${agentId}`,
          {
            text: t,
            kind: 'episode',
            salience: 0.5,
            source: { origin: 'agent' },
            confidence: 0.5,
            verified: false,
            volatile: false,
            writtenAt: now,
          },
          policy,
        );
      }),
    );
    const t1 = performance.now();
    await Promise.all(
      batches.map((docs) => env.client.store.hot.insertMany(docs.map(indexedEntry), { ordered: false })),
    );
    const directSeconds = (performance.now() - t1) / 1000;

    // Acknowledgement latency of a single-entry write with nothing else in flight.
    const idle: number[] = [];
    for (let i = 0; i < SEQUENTIAL; i++) {
      const s = performance.now();
      await env.client.write({ agentId: agents[0]!, entries: [{ text: text(0, 100_000 + i) }] });
      idle.push(performance.now() - s);
    }
    idle.sort((x, y) => x - y);

    const directRate = written / directSeconds;
    emit({
      bench: 'write-path',
      server: env.config.mongoUri
        ? 'configured'
        : 'local stack (Temporal dev server + FerretDB 1.24 on PostgreSQL 16)',
      entries: written,
      agents: AGENTS,
      direct_insertMany: { entriesPerSecond: round(directRate, 1) },
      durable: durable.map((d) => ({
        inflightPerAgent: d.inflightPerAgent,
        entriesPerSecond: round(written / d.seconds, 1),
        ratio_durable_to_direct: round(written / d.seconds / directRate, 3),
        ackLatencyMs: { p50: round(percentile(d.latencies, 50)), p99: round(percentile(d.latencies, 99)) },
      })),
      singleEntryIdleAckLatencyMs: {
        n: SEQUENTIAL,
        p50: round(percentile(idle, 50)),
        p99: round(percentile(idle, 99)),
      },
    });
  } finally {
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
