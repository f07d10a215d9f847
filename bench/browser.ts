/**
 * The memory browser opening an agent of BENCH_BROWSER_ENTRIES entries (default 250,000):
 * what the page asks when it opens the agent, `GET /v1/agents/{agentId}` and
 * `GET /v1/agents/{agentId}/nights` side by side, through `memgate serve` on a socket with its
 * API key, as the browser sends them; then, apart, the first page of its entries and an
 * entry's page.
 *
 * The agent's store is loaded as its nights would leave it: entries inserted in bulk, four
 * in five in hot and one in five in cold, a tenth superseded and a twentieth expired, salience
 * spread so some are dormant, each counted into the agent's census as the night counts them
 * (store/census.ts), and BENCH_BROWSER_NIGHTS run records holding their census. Other agents'
 * entries share the tables (BENCH_BROWSER_OTHERS of them), as in a store many agents use.
 *
 * Prints {"entries","opens","openMs":{"p50","p95","max"},"agentMs","nightsMs","entriesPageMs",
 * "entryMs"}, each the median of BENCH_BROWSER_ROUNDS rounds but `openMs`.
 */
import { createKey } from '../store/keys';
import { startHttpServer } from '../cli/commands/serve';
import { censusAsOf } from '../core/census';
import { memoryPolicy, type Entry, type Tier } from '../core/entry';
import { consolidationRunId } from '../core/ids';
import { DAY_MS, HOUR_MS } from '../core/salience';
import { countChanges } from '../store/census';
import { indexedEntry } from '../store/entries';
import { recordRun } from '../store/runs';
import { emit, episodeEntry, percentile, round, startBenchEnv, type BenchEnv } from './support';

const ENTRIES = Number(process.env.BENCH_BROWSER_ENTRIES ?? 250_000);
const OTHERS = Number(process.env.BENCH_BROWSER_OTHERS ?? 20_000);
const NIGHTS = Number(process.env.BENCH_BROWSER_NIGHTS ?? 60);
const ROUNDS = Number(process.env.BENCH_BROWSER_ROUNDS ?? 30);
const BATCH = 1_000;

const WORDS = [
  'supplier',
  'invoice',
  'deploy',
  'pipeline',
  'quota',
  'meeting',
  'budget',
  'contract',
  'roadmap',
  'incident',
  'customer',
  'release',
];

/** The i-th entry of an agent: its age, tier and state spread over the agent. */
function entryAt(agentId: string, i: number, now: number): { entry: Entry; tier: Tier } {
  const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
  const writtenAt = now - (i % 60) * DAY_MS - (i % 24) * HOUR_MS;
  const text =
    `Note ${i}: the ${WORDS[i % WORDS.length]} ${WORDS[(i * 7) % WORDS.length]} review moved ` +
    `to ${(i % 28) + 1} March, with ${i % 97} open items for team ${i % 41}.`;
  const built = episodeEntry(agentId, String(i), { text, writtenAt, salience: 0.2 + (i % 8) / 10 }, policy);
  const { pending: _pending, ...entry } = indexedEntry(built);
  if (i % 10 === 0) Object.assign(entry, { isActive: false, supersededBy: `s${i}` });
  else if (i % 20 === 1) Object.assign(entry, { expiredAt: now - DAY_MS });
  return { entry, tier: i % 5 === 4 ? 'cold' : 'hot' };
}

async function load(env: BenchEnv, agentId: string, now: number): Promise<void> {
  const store = env.client.store;
  await store.agents.insertOne({ _id: agentId, firstWriteAt: now - 60 * DAY_MS });
  for (let start = 0; start < ENTRIES; start += BATCH) {
    const copies = Array.from({ length: Math.min(BATCH, ENTRIES - start) }, (_, j) =>
      entryAt(agentId, start + j, now),
    );
    for (const tier of ['hot', 'cold'] as const) {
      const docs = copies.filter((c) => c.tier === tier).map((c) => c.entry);
      if (docs.length) await store[tier].insertMany(docs);
    }
    await countChanges(
      store,
      agentId,
      copies.map((after) => ({ after })),
    );
    if (start % 50_000 === 0) console.error(`[browser] ${start} of ${ENTRIES} entries loaded`);
  }
  const census = (await store.agents.findOne({ _id: agentId }))?.census;
  for (let n = 0; n < NIGHTS; n++) {
    const asOf = now - n * DAY_MS;
    await recordRun(store, {
      _id: consolidationRunId(agentId, asOf),
      kind: 'agent',
      agentId,
      asOf,
      status: 'completed',
      finishedAt: asOf + 10 * 60_000,
      counts: { expired: 3, refreshed: 120, rehydrated: 4, superseded: 7, summarised: 2, spilled: 300 },
      durations: {
        expire: 40,
        refresh: 30_000,
        supersede: 200,
        consolidate: 4_800,
        reclaim: 24_000,
        embed: 900,
      },
      census: censusAsOf(census, asOf),
    });
  }
  // Other tenants in the same tables, each with a handful of nights.
  const others = Array.from({ length: OTHERS }, (_, i) => entryAt(`other-${i % 40}`, i, now));
  for (let start = 0; start < others.length; start += BATCH) {
    await store.hot.insertMany(others.slice(start, start + BATCH).map((c) => c.entry));
  }
}

async function main() {
  const env = await startBenchEnv();
  try {
    const now = Date.now() - HOUR_MS;
    const agentId = `browsed-${env.runId}`;
    const t0 = performance.now();
    await load(env, agentId, now);
    console.error(`[browser] loaded in ${round((performance.now() - t0) / 1000, 1)} s`);
    const server = await startHttpServer(env.client, env.config, { port: 0 });
    const { key } = await createKey(env.client.store, agentId, Date.now());
    const get = async (path: string) => {
      const started = performance.now();
      const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      await res.json();
      return performance.now() - started;
    };
    const agentPath = `/v1/agents/${agentId}`;
    const rounds = {
      open: [] as number[],
      agent: [] as number[],
      nights: [] as number[],
      page: [] as number[],
    };
    const entryMs: number[] = [];
    const entryIdOf = entryAt(agentId, Math.floor(ENTRIES / 2) + 1, now).entry._id;
    // One round before timing: the server's first call of each route compiles its schemas.
    for (let r = -1; r < ROUNDS; r++) {
      const started = performance.now();
      const [agent, nights] = await Promise.all([get(agentPath), get(`${agentPath}/nights`)]);
      const open = performance.now() - started;
      const page = await get(`${agentPath}/memories`);
      const entry = await get(`${agentPath}/memories/${entryIdOf}`);
      if (r < 0) continue;
      rounds.open.push(open);
      rounds.agent.push(agent);
      rounds.nights.push(nights);
      rounds.page.push(page);
      entryMs.push(entry);
    }
    await server.close();
    const median = (ms: number[]) =>
      round(
        percentile(
          [...ms].sort((a, b) => a - b),
          50,
        ),
        1,
      );
    const open = [...rounds.open].sort((a, b) => a - b);
    emit({
      bench: 'browser',
      server: process.env.MONGODB_URI ? 'configured' : 'local stack (FerretDB 1.24 on PostgreSQL 16)',
      entries: ENTRIES,
      otherEntries: OTHERS,
      nights: NIGHTS,
      opens: ROUNDS,
      openMs: {
        p50: round(percentile(open, 50), 1),
        p95: round(percentile(open, 95), 1),
        max: round(open.at(-1)!, 1),
      },
      agentMs: median(rounds.agent),
      nightsMs: median(rounds.nights),
      entriesPageMs: median(rounds.page),
      entryMs: median(entryMs),
    });
  } finally {
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
