/**
 * One nightly run — the consolidateAgent workflow through the real worker — over one agent's
 * store that has grown to 110 % of its hot capacity, in the steady state the nights before
 * left it in: wall time per phase, read from the workflow's history.
 *
 * The store is the seed workload (sim/) scaled to the size asked for: 30 days of facts,
 * updates, drafts, call notes, near-duplicate tool reports and volatile quotas. The first 29
 * nights run in the simulation, which runs the same phases (core/nightly/phases.ts) over an in-memory
 * store with room for everything; its state (entries, document frequencies, the last day's
 * queries, the previous run) is loaded into the real store, and the 30th night runs there with
 * the hot capacity set to 1/1.1 of what hot holds, so it refreshes, consolidates, supersedes,
 * expires and reclaims.
 *
 * Env: BENCH_CONSOLIDATION_SIZES (entries written, default "25000,250000").
 * Prints {"sizes":[{"entries","nightMs","phases"}],"growthExponent"}, `phases` holding the wall
 * time of each phase of the pass (core/nightly/registry.ts) in the order they run, the
 * exponent being the log-log slope of nightMs between the smallest and largest size.
 */
import { randomUUID } from 'node:crypto';
import { parseConfig } from '../core/config';
import { PASS_PHASES } from '../core/nightly/registry';
import { dayOf } from '../core/salience';
import { recordRun } from '../store/runs';
import { indexedEntry } from '../store/entries';
import { insertDocumentFrequencies } from '../store/terms';
import { consolidateAgent } from '../workflows/nightly';
import { consolidateAgentWorkflowId, consolidationRunId } from '../core/ids';
import { SimStore, simPolicy } from '../sim/model';
import { seedScenario } from '../sim/scenario';
import { Workload } from '../sim/workload';
import { emit, growthExponent, round, startBenchEnv, type BenchEnv } from './support';

const SIZES = (process.env.BENCH_CONSOLIDATION_SIZES ?? '25000,250000').split(',').map(Number);
const FILL = 1.1;
/** Entries the seed workload writes at scale 1. */
const SEED_WRITES = 245_000;

/** The seed workload's first 29 nights in the simulation, with room for every entry; day 30's writes and queries on top. */
async function steadyStore(size: number, agentId: string) {
  const { params, env } = seedScenario(size / SEED_WRITES);
  const model = new SimStore(
    agentId,
    simPolicy(parseConfig({ ...env, MEMGATE_HOT_CAPACITY: String(size * 2) })),
    'memgate',
    new Workload(params).subjectNames(),
  );
  const workload = new Workload(params);
  let asOf = params.start;
  let day = 0;
  for (const { events, nightAsOf } of workload.days()) {
    for (const event of events) {
      if (event.type === 'write') model.write(event);
      else model.logQuery(event.text, event.at);
    }
    asOf = nightAsOf;
    if (++day < params.days) await model.night(nightAsOf);
  }
  return { model, asOf };
}

async function load(env: BenchEnv, agentId: string, model: SimStore): Promise<void> {
  const store = env.client.store;
  const { df, queries, lastNight } = model.snapshot();
  // Out of default recall's postings once dormant, as the nights before left it.
  const hot = [...model.hot.values()].map((e) => {
    const stored = indexedEntry(e);
    if (stored.dormantAt <= lastNight!) delete stored.liveKeys;
    return stored;
  });
  const cold = [...model.cold.values()].map(indexedEntry);
  for (let i = 0; i < hot.length; i += 1000) await store.hot.insertMany(hot.slice(i, i + 1000));
  for (let i = 0; i < cold.length; i += 1000) await store.cold.insertMany(cold.slice(i, i + 1000));
  await insertDocumentFrequencies(store, agentId, df);
  const logged = queries.map((q) => ({
    _id: randomUUID(),
    agentId,
    query: q.terms.join(' '),
    terms: q.terms,
    at: q.at,
    day: dayOf(q.at),
    deep: false,
    k: 10,
    hitIds: q.hitIds,
  }));
  for (let i = 0; i < logged.length; i += 1000) await store.queries.insertMany(logged.slice(i, i + 1000));
  // Entries whose terms the next night counts are not in the hot count yet (store/db.ts AgentRecord).
  const counted = hot.filter((e) => !e.pending?.includes('terms')).length;
  await store.agents.insertOne({ _id: agentId, firstWriteAt: 0, hot: counted, cold: cold.length });
  await recordRun(store, {
    _id: consolidationRunId(agentId, lastNight!),
    kind: 'agent',
    agentId,
    asOf: lastNight!,
    status: 'completed',
    finishedAt: Date.now(),
    counts: {},
  });
}

/** Each phase activity's wall time from the run's history: scheduled to completed, retries included. */
async function phaseTimes(env: BenchEnv, workflowId: string): Promise<Record<string, number>> {
  const history = await env.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  const scheduled = new Map<string, { type: string; at: number }>();
  const times: Record<string, number> = {};
  for (const event of history.events ?? []) {
    const at = Number(event.eventTime?.seconds ?? 0) * 1000 + Math.round((event.eventTime?.nanos ?? 0) / 1e6);
    const s = event.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(event.eventId), { type: s.activityType?.name ?? '?', at });
    const done = event.activityTaskCompletedEventAttributes;
    const of = done && scheduled.get(String(done.scheduledEventId));
    if (of) times[of.type.replace(/Phase$/, '')] = at - of.at;
  }
  return times;
}

async function runAt(size: number) {
  const agentId = `consolidation-${randomUUID().slice(0, 8)}`;
  const t0 = performance.now();
  const { model, asOf } = await steadyStore(size, agentId);
  const capacity = Math.round(model.hot.size / FILL);
  console.error(
    `[consolidation] ${size}: 29 simulated nights in ${round((performance.now() - t0) / 1000, 1)} s; ` +
      `hot ${model.hot.size}, capacity ${capacity}`,
  );
  const env = await startBenchEnv({ MEMGATE_HOT_CAPACITY: String(capacity) });
  try {
    const t1 = performance.now();
    await load(env, agentId, model);
    console.error(`[consolidation] ${size}: loaded in ${round((performance.now() - t1) / 1000, 1)} s`);
    const workflowId = consolidateAgentWorkflowId(agentId, asOf);
    const started = performance.now();
    const report = await env.client.temporal.workflow.execute(consolidateAgent, {
      taskQueue: env.config.taskQueue,
      workflowId,
      args: [{ agentId, asOf }],
    });
    const nightMs = performance.now() - started;
    const times = await phaseTimes(env, workflowId);
    const result = {
      entries: size,
      hotBefore: model.hot.size,
      capacity,
      nightMs: round(nightMs, 0),
      phases: Object.fromEntries(PASS_PHASES.map((p) => [p, times[p] ?? null])),
      counts: report.counts,
      storeAfter: report.store,
    };
    console.error(`[consolidation] ${JSON.stringify(result)}`);
    return result;
  } finally {
    await env.close();
  }
}

async function main() {
  const sizes = [];
  for (const size of SIZES) sizes.push(await runAt(size));
  emit({
    bench: 'consolidation',
    server: process.env.MONGODB_URI ? 'configured' : 'local stack (FerretDB 1.24 on PostgreSQL 16)',
    fill: FILL,
    sizes,
    growthExponent: growthExponent(sizes, (s) => s.nightMs),
  });
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
