/**
 * Records the workflow histories that test/unit/replay.test.ts replays on every run
 * (docs/versioning.md): each workflow type in the states a live agent reaches, run on the
 * real stack (the configured servers, else the local one, started here).
 *
 *   npm run histories:record            record every scenario into test/histories/
 *   npm run histories:record -- forget  only the scenarios named
 *
 * Each payload is stored with the codec's layer taken off, so replay needs no key; what a
 * write carries stays sealed under its entry's own key, which the workflow never opens.
 * Record anew only when a workflow changes compatibly on purpose (a `patched()` branch, a
 * new workflow type): the committed histories are what earlier code wrote.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ApplicationFailure, type Payload } from '@temporalio/common';
import { historyToJSON, JSONToPayload, payloadToJSON } from '@temporalio/common/lib/proto-utils';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { auditTaskQueue, auditWorkflowId, memgateAudit } from '../audit/workflow';
import { terminateOpenWorkflows } from '../client/admin';
import { MemgateClient, type ClientEndpoints } from '../client/client';
import { resolveEmbeddings } from '../stack/connection';
import { WindowClient } from '../client/window';
import { ContentCodec, ENCRYPTED_ENCODING } from '../codec/payloadCodec';
import { parseConfig } from '../core/config';
import { RehydrationBlocked } from '../core/window/blocked';
import { DAY_MS, HOUR_MS } from '../core/salience';
import { embeddingsUp, stackUp } from '../stack/stack';
import { createAuditWorker, createMemgateWorker } from '../worker/worker';
import { agentMemory, agentMemoryWorkflowId } from '../workflows/agentMemory';
import { contextWindow, contextWindowWorkflowId } from '../workflows/contextWindow';
import { eraseAgentWorkflowId } from '../workflows/eraseAgent';
import { forgetWorkflowId } from '../workflows/forget';
import { consolidateAgentWorkflowId } from '../core/ids';
import { nightlyConsolidation } from '../workflows/nightly';
import { reembedWorkflowId } from '../workflows/reembed';
import { restoreWorkflowId } from '../workflows/restore';

const REPOSITORY = resolve(__dirname, '..');
const HISTORIES = join(REPOSITORY, 'test', 'histories');
const LONGMEMEVAL_S = resolve(__dirname, '..', '..', 'shared', 'data', 'longmemeval-s');

const T0 = Date.UTC(2025, 4, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;
/** 03:00 after a day: when the Schedule runs the night. */
const night = (day: number) => dayAt(day, 3);

/** While set, every activity fails its first attempt, so each retry is in the history. */
let retryEveryActivityOnce = false;
const retryOnce: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      if (retryEveryActivityOnce && ctx.info.attempt === 1) {
        throw ApplicationFailure.retryable('failed once, as recorded', 'RecordedRetry');
      }
      return next(input);
    },
  },
});

interface Recorder {
  client: MemgateClient;
  windows: WindowClient;
  taskQueue: string;
  agent(name: string): string;
  /** Every run of the chain from `runId` on (or the current run), into `name-N.json`. */
  save(name: string, workflowId: string, runId?: string): Promise<void>;
}

/** The sources of the summary the scenarios build: near-duplicates, one with a secret. */
function duplicates(day: number) {
  return [
    { text: 'Visitors sign in at the north reception desk.', salience: 0.8, writtenAt: dayAt(day, 9) },
    {
      text: 'Visitors sign in at the north reception desk. The lab door code is 4471.',
      salience: 0.8,
      writtenAt: dayAt(day, 10),
    },
    {
      text: 'Visitors sign in at the north reception desk before nine.',
      salience: 0.8,
      writtenAt: dayAt(day, 11),
    },
  ];
}

/** A fact, and a later one on the same subject and attribute that supersedes it. */
function manager(day: number) {
  const fact = { kind: 'fact' as const, subject: 'acme', attribute: 'account manager', salience: 0.9 };
  return [
    { ...fact, text: 'The Acme account manager is Dana Whitfield.', writtenAt: dayAt(day, 10) },
    { ...fact, text: 'Acme reassigned us to a new contact, Omar Haddad.', writtenAt: dayAt(day + 1, 10) },
  ];
}

const SCENARIOS: Record<string, (r: Recorder) => Promise<void>> = {
  /** Bursts of concurrent writes, a hand-over carrying unembedded ids, and the run after it. */
  async writes(r) {
    const agentId = r.agent('writes');
    const workflowId = agentMemoryWorkflowId(agentId);
    const first = await r.client.temporal.workflow.start(agentMemory, {
      workflowId,
      taskQueue: r.taskQueue,
      args: [{ agentId, continueAsNewAfterBatches: 3 }],
    });
    for (let burst = 0; burst < 4; burst++) {
      await Promise.all(
        Array.from({ length: 5 }, (_, w) =>
          r.client.write({
            agentId,
            entries: [
              { text: `Burst ${burst} note ${w}: the parcel went to bay ${burst * 5 + w}.` },
              { text: `Burst ${burst} note ${w}: it was signed for at the gate.`, salience: 0.3 },
            ],
          }),
        ),
      );
    }
    // The last run embeds once the writes pause.
    await new Promise((done) => setTimeout(done, 5_000));
    await r.save('agentMemory-bursts', workflowId, first.firstExecutionRunId);
  },

  /**
   * Writes that go on for seconds, one every 200 ms: the run looks for their pause at doubling
   * intervals (the `embed-recheck-doubles` patch), then embeds once they stop.
   */
  async sustainedWrites(r) {
    const agentId = r.agent('sustained');
    const workflowId = agentMemoryWorkflowId(agentId);
    const until = Date.now() + 5_000;
    for (let i = 0; Date.now() < until; i++) {
      await r.client.write({
        agentId,
        entries: [{ text: `Reading ${i}: the cold room held at four degrees.` }],
      });
      await new Promise((done) => setTimeout(done, 200));
    }
    await new Promise((done) => setTimeout(done, 10_000));
    await r.save('agentMemory-sustained', workflowId);
  },

  /** A night over two agents, one page each, every activity failing once and retried. */
  async nightly(r) {
    const agents = [r.agent('night-a'), r.agent('night-b')];
    for (const agentId of agents) {
      await r.client.write({ agentId, entries: [...duplicates(0), ...manager(1)] });
    }
    retryEveryActivityOnce = true;
    try {
      const workflowId = `memgate-nightly-${randomUUID().slice(0, 8)}`;
      const run = await r.client.temporal.workflow.start(nightlyConsolidation, {
        workflowId,
        taskQueue: r.taskQueue,
        args: [{ asOf: night(3), agentsPerPage: 1 }],
      });
      await run.result();
      await r.save('nightlyConsolidation-retried', workflowId, run.firstExecutionRunId);
    } finally {
      retryEveryActivityOnce = false;
    }
    await r.save('consolidateAgent-retried', consolidateAgentWorkflowId(agents[0]!, night(3)));
  },

  /** An erasure whose entry is a source of a summary, which is rebuilt without it. */
  async forget(r) {
    const agentId = r.agent('forget');
    const { entries } = await r.client.write({ agentId, entries: duplicates(0) });
    await r.client.consolidate({ agentId, asOf: night(1) });
    const secret = entries[1]!.id;
    const result = await r.client.forget({ agentId, entryId: secret });
    if (result.resummarised.length !== 1) throw new Error('the forget rebuilt no summary');
    await r.save('forget-resummarises', forgetWorkflowId(agentId, secret));
  },

  /** A superseded fact restored, after the night that superseded it. */
  async restore(r) {
    const agentId = r.agent('restore');
    const { entries } = await r.client.write({ agentId, entries: manager(0) });
    await r.client.consolidate({ agentId, asOf: night(2) });
    const older = entries[0]!.id;
    await r.client.restore({ agentId, entryId: older });
    await r.save('restore-supersession', restoreWorkflowId(agentId, older));
  },

  async reembed(r) {
    const agentId = r.agent('reembed');
    await r.client.write({ agentId, entries: manager(0) });
    await r.client.reembed({ agentId });
    await r.save('reembed', reembedWorkflowId(agentId));
  },

  async eraseAgent(r) {
    const agentId = r.agent('erase');
    await r.client.write({ agentId, entries: duplicates(0) });
    await r.client.eraseAgent({ agentId });
    await r.save('eraseAgent', eraseAgentWorkflowId(agentId));
  },

  /** Pins, a refused rehydration, evictions, hand-overs and a close. */
  async window(r) {
    const session = r.agent('window');
    const workflowId = contextWindowWorkflowId(session);
    const first = await r.client.temporal.workflow.start(contextWindow, {
      workflowId,
      taskQueue: r.taskQueue,
      args: [
        {
          sessionId: session,
          settings: { capacity: 1_000, decay: 0.85, rehydrationThreshold: 0.5, margin: 0.1 },
          continueAsNewAfterUpdates: 8,
        },
      ],
    });
    await r.windows.admit(session, {
      segmentId: 'constraint',
      tokens: 100,
      salience: 0.9,
      pin: { kind: 'explicit' },
    });
    await r.windows.admit(session, { segmentId: 'table', tokens: 400, salience: 0.3 });
    // The table is forced out by a pinned tool output, and may not come back over the pins.
    await r.windows.admit(session, {
      segmentId: 'tool',
      tokens: 600,
      salience: 0.9,
      pin: { kind: 'toolLoop', loopId: 'fetch' },
    });
    try {
      await r.windows.rehydrate(session, { segmentId: 'table', tokens: 400, salience: 0.9 });
      throw new Error('the rehydration was not refused');
    } catch (err) {
      if (!(err instanceof RehydrationBlocked)) throw err;
    }
    for (let i = 0; i < 12; i++) {
      await r.windows.admit(session, { segmentId: `chat-${i}`, tokens: 150, salience: 0.5 + (i % 5) / 10 });
      if (i % 4 === 3) await r.windows.advanceTurn(session, {});
    }
    await r.windows.unpin(session, { segmentId: 'constraint' });
    await r.windows.close(session);
    await r.save('contextWindow-pins-refusals', workflowId, first.firstExecutionRunId);
  },

  /** The audit of one LongMemEval-S question with the evidence reader. */
  async audit(r) {
    const runId = `history-${randomUUID().slice(0, 8)}`;
    await r.client.temporal.workflow.execute(memgateAudit, {
      workflowId: auditWorkflowId(runId),
      taskQueue: auditTaskQueue(r.taskQueue),
      args: [
        {
          runId,
          source: LONGMEMEVAL_S,
          questionIds: ['00ca467f'],
          settings: {
            budgets: [8_000],
            reader: 'evidence',
            judge: 'match',
            restoreCapTokens: 2000,
            ranker: 'bm25',
          },
          concurrency: 2,
        },
      ],
    });
    await r.save('memgateAudit', auditWorkflowId(runId));
  },
};

/** A JSON payload whose codec layer is on: decoded, it is the payload the workflow saw. */
function isEncrypted(value: Record<string, unknown>): boolean {
  const encoding = (value.metadata as Record<string, unknown> | undefined)?.encoding;
  return typeof encoding === 'string' && Buffer.from(encoding, 'base64').toString() === ENCRYPTED_ENCODING;
}

/** Every encrypted payload anywhere in a history's JSON, decoded in place. */
async function decodeCodecLayer(node: unknown, codec: ContentCodec): Promise<unknown> {
  if (Array.isArray(node)) return Promise.all(node.map((n) => decodeCodecLayer(n, codec)));
  if (node === null || typeof node !== 'object') return node;
  const value = node as Record<string, unknown>;
  if ('data' in value && isEncrypted(value)) {
    const [decoded] = await codec.decode([JSONToPayload(value as Parameters<typeof JSONToPayload>[0])]);
    return payloadToJSON(decoded as Payload);
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = await decodeCodecLayer(v, codec);
  return out;
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const unknown = only.filter((name) => !(name in SCENARIOS));
  if (unknown.length) {
    throw new Error(`no scenario ${unknown.join(', ')}; there are ${Object.keys(SCENARIOS).join(', ')}`);
  }
  const env = parseConfig(process.env);
  let temporalAddress = env.temporalAddress;
  let mongoUri = env.mongoUri;
  if (!temporalAddress || !mongoUri) {
    const stack = await stackUp(env, (line) => console.error(`[stack] ${line}`));
    temporalAddress ??= stack.temporalAddress;
    mongoUri ??= stack.mongoUri;
  } else if (!env.embeddingsUrls) {
    await embeddingsUp(env, (line) => console.error(`[stack] ${line}`));
  }
  const id = randomUUID().slice(0, 8);
  const config = parseConfig({
    ...process.env,
    MEMGATE_DB: `histories_${id}`,
    MEMGATE_TASK_QUEUE: `histories-${id}`,
  });
  const endpoints: ClientEndpoints = {
    temporalAddress,
    mongoUri,
    embeddings: await resolveEmbeddings({ ...env, temporalAddress: undefined, mongoUri: undefined }, env),
  };
  const worker = await createMemgateWorker(config, endpoints, {
    interceptors: { activity: [retryOnce] },
  });
  const auditWorker = await createAuditWorker(config, endpoints);
  const running = Promise.all([worker.run(), auditWorker.run()]);
  const client = await MemgateClient.connect(config, endpoints);
  const codec = new ContentCodec(client.store);
  mkdirSync(HISTORIES, { recursive: true });
  const recorder: Recorder = {
    client,
    windows: new WindowClient(client.temporal, config),
    taskQueue: config.taskQueue,
    agent: (name) => `${name}-${id}`,
    async save(name, workflowId, runId) {
      let next: string | undefined = runId;
      let n = 0;
      do {
        const history = await client.temporal.workflow.getHandle(workflowId, next).fetchHistory();
        const decoded = await decodeCodecLayer(JSON.parse(historyToJSON(history)), codec);
        const file = join(HISTORIES, `${name}-${++n}.json`);
        // Stack traces name files relative to the repository, not where it was checked out.
        const text = JSON.stringify(decoded, null, 1).split(`${REPOSITORY}/`).join('');
        writeFileSync(file, `${text}\n`);
        console.log(`recorded ${file}`);
        const events = history.events ?? [];
        next =
          (runId && events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId) ||
          undefined;
      } while (next);
    },
  };
  try {
    for (const [name, scenario] of Object.entries(SCENARIOS)) {
      if (only.length && !only.includes(name)) continue;
      console.log(`scenario ${name}`);
      await scenario(recorder);
    }
  } finally {
    await terminateOpenWorkflows(client.temporal, config.taskQueue, 'histories recorded');
    worker.worker.shutdown();
    auditWorker.worker.shutdown();
    await running;
    await client.store.db.dropDatabase();
    await client.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
