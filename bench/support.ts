import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { terminateOpenWorkflows } from '../client/admin';
import { MemgateClient, type ClientEndpoints } from '../client/client';
import { resolveEmbeddings } from '../stack/connection';
import type { EmbeddingsEndpoint } from '../llm';
import { buildEntry, type Entry, type MemoryPolicy } from '../core/entry';
import { entryId } from '../core/ids';
import { MAX_RECALL_INDEX_WAIT_MS, parseConfig, type Config } from '../core/config';
import { postgresPaths, runningServers, stackDown, stackUp, type StackSettings } from '../stack/stack';
import { adminClient } from '../stack/postgres';
import type { WorkerInterceptors } from '@temporalio/worker';
import { createMemgateWorker, type WorkerHandle } from '../worker/worker';

export interface BenchEnv {
  /** Unique to this run: agent and session ids built on it reach this run's workflows only. */
  runId: string;
  config: Config;
  client: MemgateClient;
  worker: WorkerHandle;
  endpoints: ClientEndpoints;
  close(): Promise<void>;
}

/**
 * A worker and client on the configured servers (or the local stack, started if needed), in
 * a database, task queue and vector index folder of their own that are dropped afterwards:
 * a run at 250,000 persists about 470 MB of indexes, which no later process would ever open.
 */
export async function startBenchEnv(
  overrides: Record<string, string> = {},
  opts: { embeddings?: EmbeddingsEndpoint; interceptors?: WorkerInterceptors } = {},
): Promise<BenchEnv> {
  const id = randomUUID().slice(0, 8);
  const shared = parseConfig(process.env);
  const config = parseConfig({
    ...process.env,
    MEMGATE_DB: `bench_${id}`,
    MEMGATE_VECTOR_INDEX_DIR: join(shared.vectorIndexDir, `bench_${id}`),
    MEMGATE_TASK_QUEUE: `bench-${id}`,
    // A benchmark's first hybrid recall times the index load itself: it waits for it.
    MEMGATE_RECALL_INDEX_WAIT_MS: String(MAX_RECALL_INDEX_WAIT_MS),
    ...overrides,
  });
  let started: string[] = [];
  let servers = { temporalAddress: config.temporalAddress ?? '', mongoUri: config.mongoUri ?? '' };
  if (!config.temporalAddress || !config.mongoUri) {
    const up = await stackUp(config, (line) => console.error(`[stack] ${line}`));
    started = up.started;
    servers = {
      temporalAddress: config.temporalAddress ?? up.temporalAddress,
      mongoUri: config.mongoUri ?? up.mongoUri,
    };
  }
  const endpoints: ClientEndpoints = {
    ...servers,
    embeddings: opts.embeddings ?? (await resolveEmbeddings(config, config)),
  };
  const worker = await createMemgateWorker(config, endpoints, {
    ...(opts.interceptors && { interceptors: opts.interceptors }),
  });
  const running = worker.run();
  const client = await MemgateClient.connect(config, endpoints);
  return {
    runId: id,
    config,
    client,
    worker,
    endpoints,
    async close() {
      await terminateOpenWorkflows(client.temporal, config.taskQueue, 'benchmark finished');
      worker.worker.shutdown();
      await running;
      await client.store.db.dropDatabase();
      await client.close();
      rmSync(config.vectorIndexDir, { recursive: true, force: true });
      if (started.length) await stackDown(config, started);
    },
  };
}

/**
 * A store that grew over days has been vacuumed and has planner statistics: PostgreSQL's
 * autovacuum keeps both as it grows. One loaded in seconds has neither, and autovacuum then
 * comes round during the first minutes of what is measured: until it analyses a table, the
 * planner may take a read of a few ids by `_id` for a scan of the whole table (on the vectors
 * of bench/consolidation's store: hundreds of scans of 26,000 rows in the night's first
 * minute), and its vacuum of each freshly loaded table runs beside the work measured. So a
 * benchmark that loads the state those days would leave vacuums and analyses its database's
 * tables on the local stack once loaded, as the days would have. A store of the user's
 * (MONGODB_URI) is left as it is.
 */
export async function vacuumLoadedStore(env: BenchEnv): Promise<void> {
  if (env.config.mongoUri) return;
  const pg = await adminClient(postgresPaths(env.config), env.config.postgresPort);
  try {
    // FerretDB keeps each database as a schema of its own.
    const { rows } = await pg.query<{ name: string }>(
      `SELECT format('%I.%I', schemaname, relname) AS name FROM pg_stat_user_tables WHERE schemaname = $1`,
      [env.config.database],
    );
    for (const { name } of rows) await pg.query(`VACUUM (ANALYZE) ${name}`);
  } finally {
    await pg.end();
  }
}

/** bench/write-path's entry: agent `agent`'s `i`th observation; bench/embeddings embeds the same. */
export function writePathText(agent: number, i: number): string {
  return `Agent ${agent} observation ${i}: the build on branch feature-${i % 97} took ${(i * 7) % 300} seconds on runner ${i % 13}.`;
}

/**
 * An episode of `agentId` as the write path builds one from a write of `text` under
 * `idempotencyKey` (the write's other fields at their defaults), for benchmarks that load
 * entries without the write path.
 */
export function episodeEntry(
  agentId: string,
  idempotencyKey: string,
  write: { text: string; writtenAt: number; salience?: number },
  policy: MemoryPolicy,
): Entry {
  return buildEntry(
    entryId(agentId, { idempotencyKey }),
    agentId,
    {
      text: write.text,
      kind: 'episode',
      salience: write.salience ?? 0.5,
      source: { origin: 'agent' },
      confidence: 0.5,
      verified: false,
      volatile: false,
      writtenAt: write.writtenAt,
    },
    policy,
  );
}

export function percentile(sortedMs: number[], p: number): number {
  if (sortedMs.length === 0) return NaN;
  const i = Math.min(sortedMs.length - 1, Math.max(0, Math.ceil((p / 100) * sortedMs.length) - 1));
  return sortedMs[i]!;
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** /proc reports CPU times in USER_HZ, which Linux fixes at 100 a second on every architecture. */
const USER_HZ = 100;

/**
 * CPU time used so far, in ms: by each server of the local stack with every process under it
 * (PostgreSQL's backends, each of which leads a process group of its own), by this process
 * (`bench`: the benchmark's worker and client, every thread), and by everything else on the
 * machine (`other`). From /proc (Linux). A process that ended in between takes its time with it.
 */
export function cpuUsed(settings: StackSettings): Record<string, number> {
  const servers = new Map(Object.entries(runningServers(settings)).map(([name, pid]) => [pid, name]));
  const processes = new Map<number, { parent: number; ms: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // After the command's name (in parentheses): state, parent, …; user and system time are
    // the 12th and 13th fields from there.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    processes.set(Number(entry), {
      parent: Number(fields[1]),
      ms: ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ,
    });
  }
  const serverOf = (pid: number): string => {
    for (let at: number | undefined = pid; at !== undefined && at > 1; at = processes.get(at)?.parent) {
      const name = servers.get(at);
      if (name) return name;
    }
    return 'other';
  };
  const used: Record<string, number> = { other: 0 };
  for (const name of servers.values()) used[name] = 0;
  for (const [pid, { ms }] of processes) used[serverOf(pid)]! += ms;
  const self = process.cpuUsage();
  used.bench = (self.user + self.system) / 1000;
  return used;
}

/** CPU ms each part used between two `cpuUsed` readings, per unit of work done in between. */
export function cpuSpentPer(
  before: Record<string, number>,
  after: Record<string, number>,
  units: number,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after).map(([name, ms]) => [name, round((ms - (before[name] ?? 0)) / units, 3)]),
  );
}

/** Each benchmark prints exactly one JSON object on stdout; progress goes to stderr. */
export function emit(result: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
}

/** The log-log slope of a figure between the smallest and the largest size: 1 is linear growth. */
export function growthExponent<S extends { entries: number }>(sizes: readonly S[], figure: (s: S) => number) {
  if (sizes.length < 2) return null;
  const first = sizes[0]!;
  const last = sizes[sizes.length - 1]!;
  return round(Math.log(figure(last) / figure(first)) / Math.log(last.entries / first.entries), 3);
}
