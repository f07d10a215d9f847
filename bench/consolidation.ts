/**
 * One nightly run — the consolidateAgent workflow through the real worker — over one agent's
 * store held at 110 % of hot capacity: wall time and entries/s per phase. Each phase is one
 * activity, so its wall time is read from the workflow's history (scheduled → completed,
 * retries included) beside the run's own count of what the phase changed.
 *
 * The store is the seed workload (bench/seed30) scaled to the size asked for: 30 days of facts,
 * updates, drafts, call notes, near-duplicate tool reports and volatile quotas, loaded with
 * insertMany, with the last day's queries in the query log; the run is the night after.
 *
 * Env: BENCH_CONSOLIDATION_SIZES (entries, default "500,1000,2000"; the design's figure,
 * 250000, is for real MongoDB: on FerretDB every write by `_id` scans its collection, so a
 * night grows with the square of the store), BENCH_CONSOLIDATION_FILL (store size over
 * capacity, default 1.1).
 */
import { randomUUID } from 'node:crypto';
import type { ConsolidationReport } from '../activities/consolidation';
import { parseConfig } from '../core/config';
import type { Entry } from '../core/entry';
import { dayOf } from '../core/salience';
import { terms } from '../core/text';
import type { QueryLogRecord } from '../store/db';
import { consolidateAgent, consolidateAgentWorkflowId } from '../workflows/consolidation';
import { SimStore, simPolicy } from './seed30/model';
import { seedScenario } from './seed30/scenario';
import { Workload } from './seed30/workload';
import { emit, round, startBenchEnv, type BenchEnv } from './support';

const SIZES = (process.env.BENCH_CONSOLIDATION_SIZES ?? '500,1000,2000').split(',').map(Number);
const FILL = Number(process.env.BENCH_CONSOLIDATION_FILL ?? 1.1);
/** Entries the seed workload writes at scale 1. */
const SEED_WRITES = 245_000;

const PHASES = [
  ['expirePhase', 'expired'],
  ['refreshPhase', 'refreshed+rehydrated'],
  ['consolidatePhase', 'summarised'],
  ['supersedePhase', 'superseded'],
  ['reclaimPhase', 'spilled+evicted'],
  ['reportPhase', ''],
] as const;

interface SeededStore {
  entries: Entry[];
  queries: QueryLogRecord[];
  asOf: number;
}

/** The seed workload's 30 days at the scale that writes about `size` entries, and its last day's queries. */
function seedStore(size: number, agentId: string): SeededStore {
  const { params, env } = seedScenario(size / SEED_WRITES);
  const workload = new Workload(params);
  const model = new SimStore(agentId, simPolicy(parseConfig(env)), 'memgate', workload.subjectNames());
  const entries: Entry[] = [];
  let queries: QueryLogRecord[] = [];
  let asOf = params.start;
  for (const { events, nightAsOf } of workload.days()) {
    queries = [];
    for (const event of events) {
      if (event.type === 'write') entries.push(model.write(event));
      else
        queries.push({
          _id: randomUUID(),
          agentId,
          query: event.text,
          terms: terms(event.text),
          at: event.at,
          day: dayOf(event.at),
          deep: false,
          k: 10,
          hitIds: [],
        });
    }
    asOf = nightAsOf;
  }
  return { entries, queries, asOf };
}

async function load(env: BenchEnv, store: SeededStore): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < store.entries.length; i += 1000) {
    await env.client.store.hot.insertMany(store.entries.slice(i, i + 1000), { ordered: false });
  }
  for (let i = 0; i < store.queries.length; i += 1000) {
    await env.client.store.queries.insertMany(store.queries.slice(i, i + 1000), { ordered: false });
  }
  return (performance.now() - started) / 1000;
}

interface ActivityTiming {
  seconds: number;
  attempts: number;
}

/** Each activity's wall time from the run's history: scheduled to completed, retries included. */
async function activityTimings(env: BenchEnv, workflowId: string): Promise<Map<string, ActivityTiming>> {
  const history = await env.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  const scheduled = new Map<string, { type: string; at: number }>();
  const timings = new Map<string, ActivityTiming>();
  for (const event of history.events ?? []) {
    const at = Number(event.eventTime?.seconds ?? 0) * 1000 + Math.round((event.eventTime?.nanos ?? 0) / 1e6);
    const s = event.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(event.eventId), { type: s.activityType?.name ?? '?', at });
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const of = scheduled.get(String(started.scheduledEventId));
      if (of) timings.set(of.type, { seconds: 0, attempts: started.attempt ?? 1 });
    }
    const done = event.activityTaskCompletedEventAttributes;
    if (done) {
      const of = scheduled.get(String(done.scheduledEventId));
      const timing = of && timings.get(of.type);
      if (of && timing) timing.seconds = (at - of.at) / 1000;
    }
  }
  return timings;
}

function changed(report: ConsolidationReport, what: string): number {
  if (!what) return 0;
  const counts = report.counts as unknown as Record<string, number>;
  return what.split('+').reduce((sum, key) => sum + (counts[key] ?? 0), 0);
}

async function runAt(size: number) {
  const agentId = `consolidation-${randomUUID().slice(0, 8)}`;
  const store = seedStore(size, agentId);
  const capacity = Math.round(store.entries.length / FILL);
  const env = await startBenchEnv({ MEMGATE_HOT_CAPACITY: String(capacity) });
  try {
    const loadSeconds = await load(env, store);
    console.error(`[consolidation] ${size}: loaded in ${round(loadSeconds, 1)}s, running the night`);
    const workflowId = consolidateAgentWorkflowId(agentId, store.asOf);
    const started = performance.now();
    const report = await env.client.temporal.workflow.execute(consolidateAgent, {
      taskQueue: env.config.taskQueue,
      workflowId,
      args: [{ agentId, asOf: store.asOf }],
    });
    const wallSeconds = (performance.now() - started) / 1000;
    const timings = await activityTimings(env, workflowId);
    const phases = PHASES.map(([activity, what]) => {
      const t = timings.get(activity) ?? { seconds: NaN, attempts: 0 };
      const n = changed(report, what);
      return {
        phase: activity.replace(/Phase$/, ''),
        seconds: round(t.seconds, 2),
        attempts: t.attempts,
        storeEntriesPerSecond: round(store.entries.length / t.seconds, 1),
        ...(what ? { changed: n, changedPerSecond: round(n / t.seconds, 1), counts: what } : {}),
      };
    });
    console.error(`[consolidation] ${size}: night took ${round(wallSeconds, 1)}s`);
    return {
      entries: store.entries.length,
      capacity,
      loggedQueries: store.queries.length,
      loadSeconds: round(loadSeconds, 1),
      runSeconds: round(wallSeconds, 1),
      entriesPerSecond: round(store.entries.length / wallSeconds, 1),
      counts: report.counts,
      storeAfter: report.store,
      phases,
    };
  } finally {
    await env.close();
  }
}

async function main() {
  const runs = [];
  for (const size of SIZES) runs.push(await runAt(size));
  const first = runs[0]!;
  emit({
    bench: 'consolidation',
    server: process.env.MONGODB_URI ? 'configured' : 'local stack (FerretDB/SQLite)',
    fill: FILL,
    runs,
    // How run time grows with the store, against the smallest size (linear would equal the size ratio).
    trend: runs.map((r) => ({
      entries: r.entries,
      sizeRatio: round(r.entries / first.entries, 2),
      runSecondsRatio: round(r.runSeconds / first.runSeconds, 2),
    })),
  });
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
