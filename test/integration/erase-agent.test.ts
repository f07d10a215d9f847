import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { WorkflowNotFoundError } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { serverDeps } from '../../cli/commands/serve';
import { WindowClient } from '../../client/window';
import { consolidationRunId } from '../../core/ids';
import type { PhaseCounts } from '../../core/messages';
import { COUNT_FIELDS } from '../../core/nightly/registry';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { requireKey } from '../../server/auth';
import { buildHttpServer } from '../../server/http';
import { buildMcpServer } from '../../server/mcp';
import { contentKeys } from '../../store/contentKeys';
import { createKey, listKeys } from '../../store/keys';
import { agentMemoryWorkflowId } from '../../workflows/agentMemory';
import { contextWindowWorkflowId } from '../../workflows/contextWindow';
import { runMemgate } from '../support/cli';
import { untilHotEmbedded } from '../support/embedded';
import { startTestEnv, type TestEnv } from '../support/env';
import { failOnce, interleaveOnce } from '../support/faults';
import { expectVerified } from '../support/verify';

/**
 * Erasing a whole agent (docs/erasure.md) against the real stack, through the client, the
 * CLI, HTTP DELETE and the MCP tool: afterwards no collection holds any content of the agent,
 * its workflows and context windows are closed, `verify` is clean, a replayed write brings
 * nothing back, erasing again changes nothing, and every other agent is as it was.
 */

const T0 = Date.UTC(2025, 4, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

let env: TestEnv;
let windows: WindowClient;
let app: FastifyInstance;

beforeAll(async () => {
  // A hot tier of 10 that reclaims down to 8: the second night spills and evicts.
  env = await startTestEnv({ MEMGATE_HOT_CAPACITY: '10', MEMGATE_LOW_WATERMARK: '0.8' });
  windows = new WindowClient(env.client.temporal, env.config);
  app = buildHttpServer(serverDeps(env.client, env.config), {
    authenticate: requireKey((key) => env.client.authenticate(key)),
  });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  await env?.close();
});

/** Each text holds a made-up word no other record holds: its content, to search for. */
const NEAR_DUPLICATES = [
  'Courier pickups leave from the Vantrel dock at 16:00.',
  'Courier pickups leave from the Vantrel dock at 16:00!',
];
const OTHERS = [
  'The boiler was serviced by Brosquen.',
  'Quarterly taxes are filed with Mildorax.',
  'Marketing wants new banners for Tarvelin.',
  'Legal approved the Quospire privacy notice.',
  'Interns start on Monday in the Zendrith room.',
  'Solar panels need cleaning on the Pellomar roof.',
  'Budget review slipped a week for Ruskavel.',
  'Gym membership discount renewed at Ognithra.',
  'Fleet vans got winter tyres from Faldreum.',
  'Archive boxes moved offsite to Kestrovin.',
];
const SECRETS = [
  'vantrel',
  'brosquen',
  'mildorax',
  'tarvelin',
  'quospire',
  'zendrith',
  'pellomar',
  'ruskavel',
  'ognithra',
  'faldreum',
  'kestrovin',
];

interface Populated {
  /** The first write, to replay after the erasure. */
  first: Parameters<TestEnv['client']['write']>[0];
  session: string;
  /** A key for this agent alone, and one whose pattern covers other agents too. */
  ownKey: string;
  sharedKeyId: string;
}

/**
 * An agent with every kind of record: entries in both tiers, a summary and the eviction
 * tombstones it stands in for, vectors, query-log records, ledger records, run records, term
 * statistics, an open context window and keys.
 */
async function populate(agentId: string): Promise<Populated> {
  const first = {
    agentId,
    entries: NEAR_DUPLICATES.map((text, i) => ({ text, salience: 0.2, writtenAt: dayAt(0, 9 + i) })),
  };
  await env.client.write(first);
  await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
  await env.client.write({
    agentId,
    entries: OTHERS.map((text, i) => ({ text, salience: 0.9, writtenAt: dayAt(9, 10) + i })),
  });
  const night = await env.client.consolidate({ agentId, asOf: dayAt(10, 3) });
  expect(night.counts.evicted).toBeGreaterThan(0);
  expect(night.counts.spilled).toBeGreaterThan(0);
  await untilHotEmbedded(env.store, agentId);
  await env.client.recall({ agentId, query: 'courier pickups at vantrel', asOf: dayAt(10, 9) });
  await env.client.recall({ agentId, query: 'boiler serviced by brosquen', deep: true, asOf: dayAt(10, 9) });
  const session = `${agentId}-chat`;
  await windows.open(session);
  await windows.admit(session, { segmentId: 'notes', tokens: 100, salience: 0.5, label: 'Vantrel notes' });
  const ownKey = (await createKey(env.store, agentId, Date.now())).key;
  const sharedKeyId = (await createKey(env.store, `${agentId}*`, Date.now())).keyId;
  return { first, session, ownKey, sharedKeyId };
}

/**
 * Every document of every collection that names the agent (by `agentId`, or as its `_id`).
 * Of its vector feed only the counter: where readers stand on it is theirs to move, whenever
 * they read (store/vectorFeed.ts), with no write of the agent's.
 */
async function everything(agentId: string): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const { name } of await env.store.db.listCollections({}, { nameOnly: true }).toArray()) {
    const docs = await env.store.db
      .collection(name)
      .find({ $or: [{ agentId }, { _id: agentId as never }] })
      .sort({ _id: 1 })
      .toArray();
    if (docs.length) out[name] = name === 'vector_feeds' ? docs.map(({ _id, seq }) => ({ _id, seq })) : docs;
  }
  return out;
}

/** The store holds nothing of the agent but content-free records. */
async function expectErased(agentId: string): Promise<void> {
  const left = await everything(agentId);
  const text = JSON.stringify(left).toLowerCase();
  for (const secret of SECRETS) expect([secret, text.includes(secret)]).toEqual([secret, false]);
  for (const gone of ['entries_hot', 'entries_cold', 'queries', 'term_stats', 'runs', 'agents']) {
    expect([gone, left[gone] ?? []]).toEqual([gone, []]);
  }
  for (const stone of left.tombstones ?? []) {
    expect(stone).toEqual({
      _id: expect.any(String),
      agentId,
      terms: [],
      termKeys: [],
      reason: expect.stringMatching(/^erased/),
      deletedAt: expect.any(Number),
    });
  }
  for (const record of left.vectors ?? []) {
    expect(record).not.toHaveProperty('vector');
    expect(record).not.toHaveProperty('textHash');
  }
  expect((left.ledger ?? []).map((r) => (r as { event: string }).event)).toEqual(['erase-agent']);
}

/** Closed, or already deleted from Temporal: in either case no run of it is open. */
async function expectClosed(workflowId: string): Promise<void> {
  try {
    const { status } = await env.client.temporal.workflow.getHandle(workflowId).describe();
    expect([workflowId, status.name]).not.toEqual([workflowId, 'RUNNING']);
  } catch (err) {
    expect(err).toBeInstanceOf(WorkflowNotFoundError);
  }
}

/**
 * Until Temporal no longer has the workflow (run) at all: the server deletes a history in the
 * background after it is asked to, within seconds to a minute on the local stack.
 */
async function untilDeleted(workflowId: string, runId?: string): Promise<void> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      await env.client.temporal.workflow.getHandle(workflowId, runId).describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      throw err;
    }
    if (Date.now() > deadline) throw new Error(`${workflowId} is still in Temporal`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function expectRunning(workflowId: string): Promise<void> {
  const { status } = await env.client.temporal.workflow.getHandle(workflowId).describe();
  expect([workflowId, status.name]).toEqual([workflowId, 'RUNNING']);
}

/** What `everything` returns for another agent, once its embedding has settled. */
async function settled(agentId: string): Promise<Record<string, unknown[]>> {
  await untilHotEmbedded(env.store, agentId);
  return everything(agentId);
}

const NOTHING_REMOVED = {
  workflowsClosed: 0,
  tombstoned: 0,
  entriesRemoved: 0,
  vectorsCleared: 0,
  queriesRemoved: 0,
  ledgerRemoved: 0,
  termStatsRemoved: 0,
  runsRemoved: 0,
  keysRevoked: [],
};

describe('erasing a whole agent (docs/erasure.md)', () => {
  it('through the CLI removes every record, closes its workflows, survives a replay and a second erasure, and touches no other agent', async () => {
    const agentId = env.agent('erase-cli');
    const populated = await populate(agentId);
    // Another agent, and one whose id begins with this one's: its window's session is named
    // after it, and so begins with this agent's id too.
    const other = env.agent('erase-bystander');
    const longer = `${agentId}-sub`;
    for (const id of [other, longer]) {
      await env.client.write({ agentId: id, entries: [{ text: `The ${id} office plant needs water.` }] });
      await env.client.recall({ agentId: id, query: 'office plant' });
      await windows.open(`${id}-chat`);
    }
    const before = { other: await settled(other), longer: await settled(longer) };
    const stored = {
      entries:
        (await env.store.hot.countDocuments({ agentId })) +
        (await env.store.cold.countDocuments({ agentId })),
      cold: await env.store.cold.countDocuments({ agentId }),
      ids: await env.store.entryIds.countDocuments({ agentId }),
      vectors: await env.store.vectors.countDocuments({ agentId, vector: { $exists: true } }),
      queries: await env.store.queries.countDocuments({ agentId }),
    };
    expect(stored.cold).toBeGreaterThan(0);
    expect(stored.vectors).toBeGreaterThan(0);
    await expectRunning(agentMemoryWorkflowId(agentId));
    await expectRunning(contextWindowWorkflowId(populated.session));
    const memoryRuns: string[] = [];
    const listed = env.client.temporal.workflow.list({
      query: `WorkflowId = '${agentMemoryWorkflowId(agentId)}'`,
    });
    for await (const wf of listed) memoryRuns.push(wf.runId);
    expect(memoryRuns.length).toBeGreaterThan(0);

    const run = await runMemgate(env, ['forget', '--agent', agentId, '--all']);
    expect([run.code, run.stderr]).toEqual([0, '']);
    const result = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(result).toMatchObject({
      agentId,
      tombstoned: stored.ids,
      entriesRemoved: stored.entries,
      vectorsCleared: stored.vectors,
      queriesRemoved: stored.queries,
      keysRevoked: [expect.any(String)],
    });
    expect(result.workflowsClosed).toBeGreaterThanOrEqual(2);
    expect(result.ledgerRemoved).toBeGreaterThan(0);
    expect(result.termStatsRemoved).toBeGreaterThan(0);
    expect(result.runsRemoved).toBe(2);

    await expectErased(agentId);
    await expectClosed(agentMemoryWorkflowId(agentId));
    await expectClosed(contextWindowWorkflowId(populated.session));
    await expectVerified(env, agentId);
    expect((await env.client.verify()).findings).toEqual([]);
    // The key that named this agent alone is revoked; the one covering others too is kept.
    const keys = new Map((await listKeys(env.store)).map((k) => [k.agents, k]));
    expect(keys.get(agentId)?.revokedAt).toEqual(expect.any(Number));
    expect(keys.get(`${agentId}*`)).toMatchObject({ _id: populated.sharedKeyId });
    expect(keys.get(`${agentId}*`)?.revokedAt).toBeUndefined();

    // Every other agent is as it was, its window still open.
    expect({ other: await everything(other), longer: await everything(longer) }).toEqual(before);
    await expectRunning(contextWindowWorkflowId(`${other}-chat`));
    await expectRunning(contextWindowWorkflowId(`${longer}-chat`));

    // A second erasure succeeds and changes nothing.
    const snapshot = await everything(agentId);
    await expect(env.client.eraseAgent({ agentId })).resolves.toEqual({ agentId, ...NOTHING_REMOVED });
    expect(await everything(agentId)).toEqual(snapshot);

    // A replayed write writes nothing: every id is behind its erasure tombstone.
    const replayed = await env.client.write(populated.first);
    expect(replayed.entries.map((e) => e.status)).toEqual(['deleted', 'deleted']);
    expect(await env.store.hot.countDocuments({ agentId })).toBe(0);
    expect(await env.store.cold.countDocuments({ agentId })).toBe(0);
    expect(await env.store.vectors.countDocuments({ agentId, vector: { $exists: true } })).toBe(0);
    await expectVerified(env, agentId);

    // The histories that held what was written are deleted, not only closed.
    await untilDeleted(contextWindowWorkflowId(populated.session));
    for (const runId of memoryRuns) await untilDeleted(agentMemoryWorkflowId(agentId), runId);
  }, 600_000);

  it('refuses an entry id and --all together, and neither, with a typed error', async () => {
    const agentId = env.agent('erase-cli-bad');
    const both = await runMemgate(env, ['forget', 'some-entry', '--agent', agentId, '--all']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('[InvalidInput]');
    expect(both.stderr).toContain('--all');
    const neither = await runMemgate(env, ['forget', '--agent', agentId]);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain('[InvalidInput]');
    expect(neither.stderr).toContain('<entryId>');
  }, 120_000);

  it('through HTTP DELETE, within its key scope only', async () => {
    const agentId = env.agent('erase-http');
    const populated = await populate(agentId);
    const outsider = (await createKey(env.store, env.agent('erase-http-outsider'), Date.now())).key;
    const call = (key: string) =>
      app.inject({
        method: 'DELETE',
        url: `/v1/agents/${agentId}`,
        headers: { authorization: `Bearer ${key}` },
      });

    const before = await settled(agentId);
    const refused = await call(outsider);
    expect([refused.statusCode, refused.json().error.type]).toEqual([403, 'Forbidden']);
    expect(await everything(agentId)).toEqual(before);

    const erased = await call(populated.ownKey);
    expect(erased.statusCode).toBe(200);
    expect(erased.json()).toMatchObject({ agentId, keysRevoked: [expect.any(String)] });
    expect(erased.json().entriesRemoved).toBeGreaterThan(0);
    await expectErased(agentId);
    await expectClosed(agentMemoryWorkflowId(agentId));
    await expectClosed(contextWindowWorkflowId(populated.session));
    await expectVerified(env, agentId);
    // The key named only this agent: it went with it.
    expect((await call(populated.ownKey)).statusCode).toBe(401);
  }, 600_000);

  it('resumes after a crash mid-way and finishes the erasure', async () => {
    const agentId = env.agent('erase-crash');
    await populate(agentId);
    let crashed = false;
    // The worker "dies" before its first delete from cold: hot is gone, cold is not yet.
    const undo = failOnce(
      env.worker.store,
      'cold',
      'bulkWrite',
      async () => {
        crashed = true;
      },
      (args) => (args[0] as object[]).every((op) => 'deleteOne' in op),
    );
    try {
      await env.client.eraseAgent({ agentId });
    } finally {
      undo();
    }
    expect(crashed).toBe(true);
    await expectErased(agentId);
    await expectVerified(env, agentId);
  }, 600_000);

  it('leaves no key under which a write resent during the sweep opens', async () => {
    const agentId = env.agent('erase-resent');
    const write = { text: 'Vantrel pays its courier on 2031-04-17.', idempotencyKey: 'vantrel-courier' };
    const [stored] = (await env.client.write({ agentId, entries: [write] })).entries;
    // Sent again after the erasure deleted the agent's keys, before it tombstoned the id: the
    // client makes a new key, and the entry, still stored, is answered existing.
    let resent = '';
    const undo = interleaveOnce(env.worker.store, 'tombstones', 'bulkWrite', async () => {
      const [again] = (await env.client.write({ agentId, entries: [write] })).entries;
      resent = again!.status;
    });
    try {
      await env.client.eraseAgent({ agentId });
    } finally {
      undo();
    }
    expect(resent).toBe('existing');
    expect([...(await contentKeys(env.store, agentId, [stored!.id])).keys()]).toEqual([]);
    const report = await env.client.verify({ agentId });
    expect(report.findings.filter((f) => f.check === 'erased-in-temporal-history')).toEqual([]);
  }, 600_000);

  // A night lists its agents a page at a time and starts their runs long after: a run can
  // begin, or report, once the erasure has closed the agent's workflows.
  describe("leaves no record of the agent's night that reports", () => {
    const nothingCounted = Object.fromEntries(COUNT_FIELDS.map((field) => [field, 0])) as PhaseCounts;
    const report = async (agentId: string) => {
      const asOf = dayAt(20, 3);
      const run = { agentId, asOf, runId: consolidationRunId(agentId, asOf), policy: env.client.policy };
      const activities = createActivities({
        store: env.store,
        config: env.config,
        embeddings: env.endpoints.embeddings,
        vectorIndexes: env.client.vectorIndexes,
      });
      await new MockActivityEnvironment().run(activities.reportPhase, run, nothingCounted);
    };

    it('while the erasure removes its records', async () => {
      const agentId = env.agent('erase-night-during');
      await env.client.write({ agentId, entries: [{ text: OTHERS[0]!, writtenAt: dayAt(0, 9) }] });
      // After the erasure deleted the agent's runs' records, as it gives its keys their places back.
      const undo = interleaveOnce(
        env.worker.store,
        'keyClaims',
        'find',
        () => report(agentId),
        (args) => (args[0] as { agentId?: unknown }).agentId === agentId,
      );
      try {
        await env.client.eraseAgent({ agentId });
      } finally {
        undo();
      }
      expect(await everything(agentId)).not.toHaveProperty('runs');
    }, 120_000);

    it('once the erasure is over', async () => {
      const agentId = env.agent('erase-night-after');
      await env.client.write({ agentId, entries: [{ text: OTHERS[1]!, writtenAt: dayAt(0, 9) }] });
      await env.client.eraseAgent({ agentId });
      await report(agentId);
      expect(await everything(agentId)).not.toHaveProperty('runs');
    }, 120_000);
  });

  it('answers with nothing removed for an agent that never wrote', async () => {
    const agentId = env.agent('erase-never-written');
    await expect(env.client.eraseAgent({ agentId })).resolves.toEqual({ agentId, ...NOTHING_REMOVED });
    expect(await everything(agentId)).toEqual({});
  }, 120_000);

  it('as the MCP tool forget_agent, within its key scope only', async () => {
    const agentId = env.agent('erase-mcp');
    await env.client.write({ agentId, entries: [{ text: 'The Vantrel courier calls at noon.' }] });
    const scope = { keyId: 'test', agents: agentId };
    const server = buildMcpServer({ memgate: env.client, windows, scope: async () => scope });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const mcp = new McpClient({ name: 'memgate-test', version: '1.0.0' });
    await mcp.connect(clientSide);
    try {
      const refused = await mcp.callTool({
        name: 'forget_agent',
        arguments: { agentId: env.agent('erase-mcp-outsider') },
      });
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toContain('Forbidden');
      const erased = await mcp.callTool({ name: 'forget_agent', arguments: { agentId } });
      expect(erased.isError).toBeFalsy();
      expect(erased.structuredContent).toMatchObject({ agentId, entriesRemoved: 1 });
      await expectErased(agentId);
    } finally {
      await mcp.close();
      await server.close();
    }
  }, 300_000);
});
