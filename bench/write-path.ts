/**
 * The same N entries written (a) through the durable write path (Update-with-start into each
 * agent's workflow, one entry per Update) by 16 concurrent agents and (b) with the driver's
 * insertMany straight into the same server; plus the acknowledgement latency of single-entry
 * writes to one agent on an idle system (and, with embeddings, after the bursts, once the
 * agents' workflows have begun to embed what they acknowledged). Sizes: BENCH_WRITE_N (default 4000), BENCH_AGENTS (16),
 * BENCH_INFLIGHT (writes in flight per agent, one run per level, default "8,32"),
 * BENCH_SEQUENTIAL (300). Concurrent writes of one agent are coalesced by the client, so
 * more writes in flight means more entries per Update. The durable runs are made twice in
 * one run: with the embeddings endpoint (the agent's workflow embeds what it acknowledged,
 * after the acknowledgement) and without one (`withoutEmbeddings`), side by side. Each durable
 * run reports the CPU each server of the local stack spent per entry, to show which one the
 * write path's ceiling is; the single writes, where each acknowledgement's time goes, part by
 * part (`idleAckBreakdownMs`, `ackWhileEmbeddingBreakdownMs`). Beside each run, the floor
 * (bench/floor/updateFloor.ts: an Update and a local activity with none of memgate's work in
 * them) on the same server and in the same process: the same entries at each in-flight level,
 * coalesced into Updates as the client coalesces writes (`floorDurable`), and as many single
 * Updates as single writes: what the write path's rate and acknowledgement cost there before
 * memgate adds to them.
 */
import { availableParallelism } from 'node:os';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerInterceptors } from '@temporalio/worker';
import { createPolicyActivities } from '../activities/policy';
import { sealWrite } from '../codec/sealedEntry';
import { memoryPolicy, parseWriteRequest } from '../core/entry';
import { writeLimitsOf } from '../core/policy';
import { WriteCoalescer } from '../core/writeCoalescer';
import { indexedEntry } from '../store/entries';
import { temporalConnectionOptions } from '../stack/connection';
import { countVectors, hotAwaitingEmbedding } from '../store/vectors';
import { agentMemoryWorkflowId } from '../workflows/agentMemory';
import { floorUpdate, updateFloor, type FloorActivities } from './floor/updateFloor';
import {
  cpuSpentPer,
  cpuUsed,
  emit,
  episodeEntry,
  percentile,
  round,
  startBenchEnv,
  writePathText as text,
  type BenchEnv,
} from './support';

const N = Number(process.env.BENCH_WRITE_N ?? 4000);
const AGENTS = Number(process.env.BENCH_AGENTS ?? 16);
const INFLIGHT_LEVELS = (process.env.BENCH_INFLIGHT ?? '8,32').split(',').map(Number);
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 300);

/**
 * The floor's worker, in this process beside memgate's, and one workflow of it per agent:
 * `acks()` times SEQUENTIAL of its Updates, one at a time, each with one entry; `burst()` sends
 * the entries of the durable runs, as many writes in flight per agent, coalesced into Updates
 * as memgate's client coalesces writes. Without memgate's payload codec, which is memgate's.
 */
async function startFloor(env: BenchEnv, agents: number) {
  const connectionOptions = temporalConnectionOptions(env.config, env.endpoints.temporalAddress);
  const taskQueue = `${env.config.taskQueue}-floor`;
  const connection = await NativeConnection.connect(connectionOptions);
  const activities: FloorActivities = { nothing: async (entries) => entries.length };
  const worker = await Worker.create({
    connection,
    namespace: env.config.temporalNamespace,
    taskQueue,
    workflowsPath: require.resolve('./floor/updateFloor'),
    activities,
  });
  const running = worker.run();
  const client = new Client({
    connection: await Connection.connect(connectionOptions),
    namespace: env.config.temporalNamespace,
  });
  const handles = await Promise.all(
    Array.from({ length: agents }, (_, a) =>
      client.workflow.start(updateFloor, { taskQueue, workflowId: `${taskQueue}-${a}` }),
    ),
  );
  const policy = await createPolicyActivities(env.client.store).currentPolicy();
  // The entries as memgate's client sends them (defaults filled, `writtenAt` fixed), built
  // before the clock starts: the floor does none of memgate's work.
  const asWritten = (texts: string[]) =>
    parseWriteRequest(
      { agentId: 'floor', entries: texts.map((t) => ({ text: t, writtenAt: Date.now() })) },
      { ...writeLimitsOf(policy), maxEntriesPerWrite: texts.length },
      Date.now(),
    ).entries;
  return {
    acks: () => {
      const entries = asWritten(Array.from({ length: SEQUENTIAL }, (_, i) => text(0, 200_000 + i)));
      return timedOneByOne((i) => handles[0]!.executeUpdate(floorUpdate, { args: [[entries[i]]] }));
    },
    async burst(inflight: number, perAgent: number) {
      const entries = handles.map((_, a) =>
        asWritten(Array.from({ length: perAgent }, (_, i) => text(a, i))),
      );
      let updates = 0;
      const coalescer = new WriteCoalescer<number>(async (a, batch) => {
        updates++;
        await handles[Number(a)]!.executeUpdate(floorUpdate, { args: [batch] });
        return batch.map(() => 0);
      }, policy.maxEntriesPerWrite);
      const run = await closedLoop(handles.length, inflight, perAgent, (a, i) =>
        coalescer.write(String(a), [entries[a]![i]!]),
      );
      return { ...run, updates };
    },
    async close() {
      await Promise.all(handles.map((h) => h.terminate('benchmark finished')));
      worker.shutdown();
      await running;
      await connection.close();
      await client.connection.close();
    },
  };
}

/**
 * `agents` agents, each with `inflight` writes in flight until it has written `perAgent`:
 * how long that took, and each write's latency.
 */
async function closedLoop(
  agents: number,
  inflight: number,
  perAgent: number,
  write: (agent: number, i: number) => Promise<unknown>,
) {
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: agents }, async (_, a) => {
      let next = 0;
      const lane = async () => {
        while (next < perAgent) {
          const i = next++;
          const s = performance.now();
          await write(a, i);
          latencies.push(performance.now() - s);
        }
      };
      await Promise.all(Array.from({ length: inflight }, lane));
    }),
  );
  latencies.sort((x, y) => x - y);
  return { seconds: (performance.now() - t0) / 1000, latencies };
}

/** The floor and then the durable path at each in-flight level, then single writes on an idle agent. */
async function durableArm(env: BenchEnv, agents: readonly string[], persists: readonly PersistRun[]) {
  const perAgent = Math.ceil(N / AGENTS);
  const written = perAgent * AGENTS;
  // The floor's bursts first, before any write of these agents: once memgate's writes pause,
  // its agents' workflows embed what they acknowledged, which the floor would run beside.
  const floor = await startFloor(env, agents.length);
  const floorDurable = [];
  for (const inflight of INFLIGHT_LEVELS) {
    const cpuBefore = cpuUsed(env.config);
    const run = await floor.burst(inflight, perAgent);
    floorDurable.push({
      inflightPerAgent: inflight,
      ...run,
      cpuMsPerEntry: cpuSpentPer(cpuBefore, cpuUsed(env.config), written),
    });
  }
  // Start every agent's workflow first so the runs measure steady-state writes, not first starts.
  await Promise.all(
    agents.map((agentId) =>
      env.client.write({ agentId, entries: [{ text: 'warm-up', idempotencyKey: 'warm' }] }),
    ),
  );
  const durable = [];
  for (const inflight of INFLIGHT_LEVELS) {
    const cpuBefore = cpuUsed(env.config);
    const { seconds, latencies } = await closedLoop(agents.length, inflight, perAgent, (a, i) =>
      env.client.write({
        agentId: agents[a]!,
        entries: [{ text: text(a, i), idempotencyKey: `w-${inflight}-${i}` }],
      }),
    );
    const cpuMsPerEntry = cpuSpentPer(cpuBefore, cpuUsed(env.config), written);
    durable.push({ inflightPerAgent: inflight, seconds, latencies, cpuMsPerEntry });
    console.error(
      `[write-path] ${written} entries with ${inflight} in flight per agent: ${round(seconds, 1)} s`,
    );
  }
  // Single-entry writes to one agent, one at a time: after the bursts, while the agents'
  // workflows embed what they acknowledged (with an embeddings endpoint), and on an idle
  // system, once that embedding has settled.
  const embeds = !('unavailable' in env.endpoints.embeddings);
  if (embeds) {
    // The agents' workflows embed once their writes pause, up to EMBED_RECHECK_MAX_MS after
    // it: the single writes below start once that embedding is under way.
    const seconds = await untilEmbeddingBegins(env, agents.slice(1));
    console.error(`[write-path] the backlog began to be embedded ${round(seconds, 1)} s after the bursts`);
  }
  const whileEmbedding = embeds ? await singleWrites(env, agents[0]!, 0) : undefined;
  // The backlog takes a minute and more to embed: the floor's Updates right after still run beside it.
  const floorWhileEmbedding = embeds ? await floor.acks() : undefined;
  if (embeds) {
    const seconds = await untilEmbedded(env, agents);
    console.error(`[write-path] the backlog was embedded in ${round(seconds, 1)} s more`);
  }
  const idle = await singleWrites(env, agents[0]!, 1);
  // The idle writes' own entries are embedded once they pause: the floor's idle Updates wait
  // for that too, so they run on a system as idle as the writes did.
  if (embeds) await untilEmbedded(env, agents.slice(0, 1));
  const floorIdle = await floor.acks();
  await floor.close();
  return {
    written,
    durable,
    floorDurable,
    idle,
    whileEmbedding,
    floorIdle,
    floorWhileEmbedding,
    ...(await breakdowns(env, agents[0]!, { idle, whileEmbedding }, persists)),
  };
}

/** Where the single writes' time went (`breakdownOf`), idle and while embedding. */
async function breakdowns(
  env: BenchEnv,
  agentId: string,
  writes: { idle: readonly Timed[]; whileEmbedding: readonly Timed[] | undefined },
  persists: readonly PersistRun[],
) {
  const workflowId = agentMemoryWorkflowId(agentId);
  const tasks = await updateTasks(env, workflowId);
  const own = persists.filter((p) => p.workflowId === workflowId);
  return {
    idleBreakdown: {
      seal: await sealAlone(env, `${agentId}-alone`),
      ...breakdownOf(writes.idle, tasks, own),
    },
    whileEmbeddingBreakdown: writes.whileEmbedding && breakdownOf(writes.whileEmbedding, tasks, own),
  };
}

/**
 * The agent's workflow tasks that completed a write's Update, each with its bounds as the server
 * recorded them (ms since the epoch, fractional), from every run of the agent's workflow.
 */
async function updateTasks(env: BenchEnv, workflowId: string) {
  // Every run, oldest first: the workflow may have continued as new meanwhile.
  const runs: { runId: string; startTime: Date }[] = [];
  for await (const run of env.client.temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
    runs.push(run);
  runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  const events = [];
  for (const { runId } of runs)
    events.push(
      ...((await env.client.temporal.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? []),
    );
  // Not the SDK's tsToMs, which floors to whole milliseconds: these parts are about one.
  const at = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
    Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
  const tasks: UpdateTask[] = [];
  let scheduled = 0;
  let started = 0;
  let completed: number | undefined;
  for (const e of events) {
    if (e.workflowTaskScheduledEventAttributes) scheduled = at(e.eventTime);
    if (e.workflowTaskStartedEventAttributes) started = at(e.eventTime);
    if (e.workflowTaskCompletedEventAttributes) completed = at(e.eventTime);
    if (e.workflowExecutionUpdateCompletedEventAttributes && completed !== undefined) {
      tasks.push({ scheduled, started, completed });
      completed = undefined;
    }
  }
  return tasks;
}

interface UpdateTask {
  scheduled: number;
  started: number;
  completed: number;
}

/**
 * Where single writes' acknowledgements go, part by part, write by write: from the client's
 * send to the server scheduling the agent's workflow task (the client sealing the entry, the
 * Update's trip, the server admitting it), the task waiting for the worker, the task up to the
 * persisting local activity (the Update's activation and validation, the activity's dispatch),
 * the activity itself (in the worker, on the store), the task after it (the result back in the
 * workflow, the Update completed, the task's completion sent and recorded), and the answer's
 * trip back to the client. The task's bounds are the server's times from the agent's history,
 * its inner ones the worker's (`persistRecorder`), all on this machine's clock.
 */
function breakdownOf(
  writes: readonly Timed[],
  tasks: readonly UpdateTask[],
  persists: readonly PersistRun[],
) {
  const parts = {
    toWorkflowTask: [] as number[],
    workflowTaskScheduleToStart: [] as number[],
    workflowTaskStartToComplete: [] as number[],
    toPersist: [] as number[],
    persist: [] as number[],
    afterPersist: [] as number[],
    backToClient: [] as number[],
  };
  for (const w of writes) {
    const answeredAt = w.sentAt + w.ms;
    // The writes went one at a time, one Update each: the task within a write's own span is its.
    const task = tasks.find((t) => t.scheduled >= w.sentAt && t.completed <= answeredAt);
    if (!task) continue;
    parts.toWorkflowTask.push(task.scheduled - w.sentAt);
    parts.workflowTaskScheduleToStart.push(task.started - task.scheduled);
    parts.workflowTaskStartToComplete.push(task.completed - task.started);
    parts.backToClient.push(answeredAt - task.completed);
    const persist = persists.find((p) => p.start >= task.started && p.end <= task.completed);
    if (!persist) continue;
    parts.toPersist.push(persist.start - task.started);
    parts.persist.push(persist.end - persist.start);
    parts.afterPersist.push(task.completed - persist.end);
  }
  return Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, latencyOf(v)])) as Record<
    keyof typeof parts,
    ReturnType<typeof latencyOf>
  >;
}

/** The client sealing a single write alone (storing its content key), SEQUENTIAL times. */
async function sealAlone(env: BenchEnv, agentId: string) {
  const store = env.client.store;
  const policy = await createPolicyActivities(store).currentPolicy();
  const seal: number[] = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    // As the client builds a write of one entry (its defaults filled, `writtenAt` fixed).
    const { entries } = parseWriteRequest(
      { agentId, entries: [{ text: text(0, 300_000 + i) }] },
      writeLimitsOf(policy),
      Date.now(),
    );
    for (const e of entries) e.writtenAt ??= Date.now();
    const s = performance.now();
    await sealWrite(store, agentId, entries);
    seal.push(performance.now() - s);
  }
  return latencyOf(seal);
}

/** Seconds until a vector of one of these agents is stored. */
async function untilEmbeddingBegins(env: BenchEnv, agents: readonly string[]): Promise<number> {
  const t = performance.now();
  for (;;) {
    const counts = await Promise.all(agents.map((agentId) => countVectors(env.client.store, agentId)));
    if (counts.some((n) => n > 0)) return (performance.now() - t) / 1000;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Seconds until no hot entry of these agents awaits its vector any more. */
async function untilEmbedded(env: BenchEnv, agents: readonly string[]): Promise<number> {
  const t = performance.now();
  for (const agentId of agents) {
    while (await hotAwaitingEmbedding(env.client.store, agentId))
      await new Promise((r) => setTimeout(r, 500));
  }
  return (performance.now() - t) / 1000;
}

/** A call's start on this machine's clock (ms since the epoch, fractional) and how long it took. */
interface Timed {
  sentAt: number;
  ms: number;
}

const wallClock = () => performance.timeOrigin + performance.now();

/** SEQUENTIAL calls of `call`, one at a time, each timed. */
async function timedOneByOne(call: (i: number) => Promise<unknown>): Promise<Timed[]> {
  const timed: Timed[] = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const sentAt = wallClock();
    await call(i);
    timed.push({ sentAt, ms: wallClock() - sentAt });
  }
  return timed;
}

function singleWrites(env: BenchEnv, agentId: string, pass: number): Promise<Timed[]> {
  return timedOneByOne((i) =>
    env.client.write({ agentId, entries: [{ text: text(0, 100_000 * (pass + 1) + i) }] }),
  );
}

/** When the worker ran each persisting activity, and for which workflow. */
interface PersistRun {
  workflowId: string;
  start: number;
  end: number;
}

/** The worker's persisting activities, timed as they run (an activity interceptor). */
function persistRecorder() {
  const runs: PersistRun[] = [];
  const interceptors: WorkerInterceptors = {
    activity: [
      (ctx) => ({
        inbound: {
          async execute(input, next) {
            const start = wallClock();
            try {
              return await next(input);
            } finally {
              if (ctx.info.activityType === 'persistWrites')
                runs.push({
                  workflowId: ctx.info.workflowExecution?.workflowId ?? '',
                  start,
                  end: wallClock(),
                });
            }
          },
        },
      }),
    ],
  };
  return { runs, interceptors };
}

function latencyOf(samples: readonly (number | Timed)[]) {
  const sorted = samples.map((x) => (typeof x === 'number' ? x : x.ms)).sort((x, y) => x - y);
  return { n: sorted.length, p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)) };
}

/** A closed-loop run of `written` entries: its rate, against `insertMany`'s, and where its time went. */
function rateOf(
  written: number,
  directRate: number,
  run: {
    inflightPerAgent: number;
    seconds: number;
    latencies: number[];
    cpuMsPerEntry: Record<string, number>;
  },
) {
  return {
    inflightPerAgent: run.inflightPerAgent,
    entriesPerSecond: round(written / run.seconds, 1),
    ratio_durable_to_direct: round(written / run.seconds / directRate, 3),
    ackLatencyMs: { p50: round(percentile(run.latencies, 50)), p99: round(percentile(run.latencies, 99)) },
    // Where the time goes: CPU ms per entry by server, and the share of the machine's cores
    // the run kept busy (near 1: the cores, not a wait, are the ceiling).
    cpuMsPerEntry: run.cpuMsPerEntry,
    coresBusyShare: round(
      Object.values(run.cpuMsPerEntry).reduce((a, b) => a + b, 0) /
        ((run.seconds * 1000 * availableParallelism()) / written),
      2,
    ),
  };
}

function report(arm: Awaited<ReturnType<typeof durableArm>>, directRate: number) {
  return {
    durable: arm.durable.map((d) => rateOf(arm.written, directRate, d)),
    // The same entries and writes in flight as Updates of the floor: the rate the server and
    // the worker allow before memgate adds its work.
    floorDurable: arm.floorDurable.map((d) => ({
      ...rateOf(arm.written, directRate, d),
      entriesPerUpdate: round(arm.written / d.updates, 1),
    })),
    singleEntryIdleAckLatencyMs: latencyOf(arm.idle),
    idleAckBreakdownMs: arm.idleBreakdown,
    ...(arm.whileEmbedding && { singleEntryAckLatencyWhileEmbeddingMs: latencyOf(arm.whileEmbedding) }),
    ...(arm.whileEmbeddingBreakdown && { ackWhileEmbeddingBreakdownMs: arm.whileEmbeddingBreakdown }),
    floorIdleAckLatencyMs: latencyOf(arm.floorIdle),
    ...(arm.floorWhileEmbedding && { floorAckLatencyWhileEmbeddingMs: latencyOf(arm.floorWhileEmbedding) }),
  };
}

async function main() {
  const recorded = persistRecorder();
  const env = await startBenchEnv({}, { interceptors: recorded.interceptors });
  const lexicalRecorded = persistRecorder();
  // The same writes through a worker and client with no embeddings endpoint: the write path
  // as it was before semantic recall, measured first, before any embedding is under way.
  const lexical = await startBenchEnv(
    {},
    {
      embeddings: { unavailable: 'the write path without embeddings' },
      interceptors: lexicalRecorded.interceptors,
    },
  );
  try {
    const agentsOf = (e: BenchEnv) => Array.from({ length: AGENTS }, (_, a) => `writer-${a}-${e.runId}`);
    let without;
    try {
      without = await durableArm(lexical, agentsOf(lexical), lexicalRecorded.runs);
    } finally {
      await lexical.close();
    }

    // The same entries, built the same way, inserted directly by 16 concurrent writers.
    const agents = agentsOf(env);
    const perAgent = Math.ceil(N / AGENTS);
    const policy = memoryPolicy(env.config);
    const now = Date.now();
    const batches = agents.map((agentId, a) =>
      Array.from({ length: perAgent }, (_, i) =>
        episodeEntry(`direct-${agentId}`, `w-${i}`, { text: text(a, i), writtenAt: now }, policy),
      ),
    );
    const t1 = performance.now();
    await Promise.all(
      batches.map((docs) => env.client.store.hot.insertMany(docs.map(indexedEntry), { ordered: false })),
    );
    const directRate = (perAgent * AGENTS) / ((performance.now() - t1) / 1000);

    const withEmbeddings = await durableArm(env, agents, recorded.runs);
    emit({
      bench: 'write-path',
      server: env.config.mongoUri
        ? 'configured'
        : 'local stack (Temporal dev server + FerretDB 1.24 on PostgreSQL 16)',
      entries: withEmbeddings.written,
      agents: AGENTS,
      direct_insertMany: { entriesPerSecond: round(directRate, 1) },
      ...report(withEmbeddings, directRate),
      withoutEmbeddings: report(without, directRate),
    });
  } finally {
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
