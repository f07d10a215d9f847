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
 * expires, reclaims and embeds.
 *
 * Vectors are loaded with the store as the agents' workflows and the nights before left them
 * (bench/vectors.ts: real embeddings of LongMemEval turns, perturbed): a summary was embedded
 * by the night that wrote it, and a write by its agent's workflow once the agent's writes
 * paused (workflows/agentMemory.ts). What the workflow had not embedded by the night's `asOf`
 * stays unembedded, with its `embed` work, for the night's embed phase, which also embeds the
 * summaries the night writes; it needs the stack's embeddings server (or
 * MEMGATE_EMBEDDINGS_URL).
 *
 * Env: BENCH_CONSOLIDATION_SIZES (entries written, default "25000,250000").
 * Prints {"sizes":[{"entries","nightMs","phases","embed"}],"growthExponent"}, `phases` holding
 * the wall time of each phase (core/nightly/registry.ts, the embed phase included) in the order
 * they run, `embed` the embed phase apart (entries embedded, time, throughput, and how many the
 * workflows had left), the exponent being the log-log slope of nightMs between the smallest and
 * largest size.
 */
import { randomUUID } from 'node:crypto';
import { parseConfig } from '../core/config';
import { oldestWriteDay, type Entry, type Tier } from '../core/entry';
import { awaitsCounting } from '../core/nightly/plans';
import { NIGHT_PHASES } from '../core/nightly/registry';
import { dayOf } from '../core/salience';
import { recordRun } from '../store/runs';
import { indexedEntry } from '../store/entries';
import { insertDocumentFrequencies } from '../store/terms';
import { consolidateAgent } from '../workflows/nightly';
import { EMBED_AFTER_QUIET_MS, EMBED_MAX_WAIT_MS } from '../workflows/agentMemory';
import { consolidateAgentWorkflowId, consolidationRunId } from '../core/ids';
import { SimStore, simPolicy } from '../sim/model';
import { seedScenario } from '../sim/scenario';
import { Workload } from '../sim/workload';
import { emit, growthExponent, round, startBenchEnv, vacuumLoadedStore, type BenchEnv } from './support';
import { baseVectors, vectorRecords, type BaseVectors } from './vectors';

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

/**
 * The writes an agent's workflow had not embedded by `asOf`: it embeds what it acknowledged
 * once no write has come for EMBED_AFTER_QUIET_MS (looking that often from the first write
 * waiting), or EMBED_MAX_WAIT_MS after that write under writes that never pause
 * (workflows/agentMemory.ts). The embedding's own time is left out: it only moves the moment
 * later by seconds.
 */
function leftUnembedded(writes: readonly { id: string; at: number }[], asOf: number): Set<string> {
  const sorted = writes.filter((w) => w.at <= asOf).sort((a, b) => a.at - b.at);
  const left = new Set<string>();
  let i = 0;
  while (i < sorted.length) {
    const since = sorted[i]!.at;
    // The write that set the lane waiting; then it looks every EMBED_AFTER_QUIET_MS.
    let j = i + 1;
    let at = since;
    for (;;) {
      at += EMBED_AFTER_QUIET_MS;
      const before = j;
      while (j < sorted.length && sorted[j]!.at <= at) j++;
      if (j === before || at >= since + EMBED_MAX_WAIT_MS) break;
    }
    if (at > asOf) for (const w of sorted.slice(i)) left.add(w.id);
    i = j;
  }
  return left;
}

async function load(
  env: BenchEnv,
  agentId: string,
  model: SimStore,
  bases: BaseVectors,
  asOf: number,
): Promise<{ unembedded: number }> {
  const store = env.client.store;
  const { df, queries, lastNight } = model.snapshot();
  const unembedded = leftUnembedded(
    [...model.hot.values(), ...model.cold.values()]
      .filter((e) => e.kind !== 'summary')
      .map((e) => ({ id: e._id, at: e.writtenAt })),
    asOf,
  );
  /** As stored: a vector given (its `embed` work done, the model recorded) unless the workflow had not yet. */
  const stored = (e: Entry): Entry => {
    const entry = indexedEntry(e);
    if (unembedded.has(e._id)) return entry;
    const pending = (entry.pending ?? []).filter((w) => w !== 'embed');
    return { ...entry, pending, embeddedWith: bases.model };
  };
  // Out of default recall's postings once dormant, as the nights before left it.
  const hot = [...model.hot.values()].map((e) => {
    const entry = stored(e);
    if (entry.dormantAt <= lastNight!) delete entry.liveKeys;
    return entry;
  });
  const cold = [...model.cold.values()].map(stored);
  for (let i = 0; i < hot.length; i += 1000) await store.hot.insertMany(hot.slice(i, i + 1000));
  for (let i = 0; i < cold.length; i += 1000) await store.cold.insertMany(cold.slice(i, i + 1000));
  const embedded: { entry: Entry; tier: Tier }[] = [
    ...hot.map((entry) => ({ entry, tier: 'hot' as const })),
    ...cold.map((entry) => ({ entry, tier: 'cold' as const })),
  ].filter(({ entry }) => !unembedded.has(entry._id));
  const at = lastNight!;
  for (let i = 0; i < embedded.length; i += 1000) {
    await store.vectors.insertMany(vectorRecords(bases, agentId, embedded.slice(i, i + 1000), i + 1, at), {
      ordered: false,
    });
  }
  await store.vectorFeeds.insertOne({ _id: agentId, seq: embedded.length });
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
  const counted = hot.filter((e) => !awaitsCounting(e));
  // A store at capacity has reclaimed before: reclaim reads hot from its oldest write day on
  // (store/db.ts AgentRecord); the first reclaim of a store reads every hot entry instead.
  const hotWrittenFrom = oldestWriteDay(counted);
  await store.agents.insertOne({
    _id: agentId,
    firstWriteAt: 0,
    hot: counted.length,
    cold: cold.length,
    hotWrittenFrom,
  });
  await recordRun(store, {
    _id: consolidationRunId(agentId, lastNight!),
    kind: 'agent',
    agentId,
    asOf: lastNight!,
    status: 'completed',
    finishedAt: Date.now(),
    counts: {},
  });
  return { unembedded: unembedded.size };
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
    const bases = await baseVectors(env, 'consolidation');
    const t1 = performance.now();
    const { unembedded } = await load(env, agentId, model, bases, asOf);
    await vacuumLoadedStore(env);
    console.error(
      `[consolidation] ${size}: loaded in ${round((performance.now() - t1) / 1000, 1)} s; ` +
        `${unembedded} writes left unembedded by their workflow`,
    );
    const workflowId = consolidateAgentWorkflowId(agentId, asOf);
    const started = performance.now();
    const report = await env.client.temporal.workflow.execute(consolidateAgent, {
      taskQueue: env.config.taskQueue,
      workflowId,
      args: [{ agentId, asOf }],
    });
    const nightMs = performance.now() - started;
    const times = await phaseTimes(env, workflowId);
    const embedMs = times.embed ?? null;
    const result = {
      entries: size,
      hotBefore: model.hot.size,
      capacity,
      nightMs: round(nightMs, 0),
      phases: Object.fromEntries(NIGHT_PHASES.map((p) => [p.name, times[p.name] ?? null])),
      embed: {
        entries: report.counts.embedded,
        ms: embedMs,
        perSecond: embedMs ? round((report.counts.embedded * 1000) / embedMs, 1) : null,
        leftByWorkflows: unembedded,
        summariesTonight: report.counts.summarised,
      },
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
