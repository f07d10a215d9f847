import { randomUUID } from 'node:crypto';
import { CancelledFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { DAY_MS } from '../../core/salience';
import { consolidationRunId } from '../../core/ids';
import { nightlyConsolidation } from '../../workflows/nightly';
import { useTestEnv } from '../support/env';

/**
 * Long nightly work heartbeats as it goes and stops when cancelled; the nightly run lists
 * its agents a page at a time; the ledger, run and audit records are pruned past their
 * retention. Phases run here as single activities (`MockActivityEnvironment`) on the real
 * store, so the test sees every heartbeat and can cancel between two of them.
 */
// Far enough back that a night 400 days later is not in the future.
const T0 = Date.UTC(2025, 5, 1);
const env = useTestEnv({ MEMGATE_NIGHTLY_BATCH: '10' });

/** `n` volatile facts, all past their freshness by day 2: the expire phase's work. */
async function writeVolatile(agentId: string, n: number): Promise<void> {
  await env.client.write({
    agentId,
    entries: Array.from({ length: n }, (_, i) => ({
      text: `Dock ${i} quota is ${i * 13} pallets this week.`,
      kind: 'fact' as const,
      volatile: true,
      freshUntil: T0 + DAY_MS,
      writtenAt: T0 + i * 1000,
    })),
  });
}

async function expireRun(agentId: string, cancelAfterBeats?: number) {
  const activities = createActivities({
    store: env.store,
    config: env.config,
    embeddings: env.endpoints.embeddings,
    vectorIndexes: env.client.vectorIndexes,
  });
  const asOf = T0 + 2 * DAY_MS;
  const mock = new MockActivityEnvironment();
  let beats = 0;
  mock.on('heartbeat', () => {
    if (++beats === cancelAfterBeats) mock.cancel();
  });
  const run = { agentId, asOf, runId: consolidationRunId(agentId, asOf), policy: env.client.policy };
  const outcome = await mock.run(activities.expirePhase, run).catch((err: unknown) => err);
  return { outcome, beats };
}

const expiredCount = (agentId: string) =>
  env.store.hot.countDocuments({ agentId, expiredAt: { $exists: true } });

describe('a long nightly phase', () => {
  it('heartbeats for every step, not only while it reads', async () => {
    const agentId = env.agent('beats');
    await writeVolatile(agentId, 40);
    const { outcome, beats } = await expireRun(agentId);
    expect(outcome).toEqual({ expired: 40 });
    // Four batches read, forty entries annotated, each a heartbeat at least.
    expect(beats).toBeGreaterThanOrEqual(40);
  });

  it('stops at its next step once cancelled, and a rerun finishes the work', async () => {
    const agentId = env.agent('cancel');
    await writeVolatile(agentId, 40);
    const { outcome } = await expireRun(agentId, 12);
    expect(outcome).toBeInstanceOf(CancelledFailure);
    const partly = await expiredCount(agentId);
    expect(partly).toBeLessThan(40);
    expect(await expireRun(agentId)).toMatchObject({ outcome: { expired: 40 } });
    expect(await expiredCount(agentId)).toBe(40);
  });
});

describe('the nightly run', () => {
  it('lists its agents a page at a time and prunes records past their retention', async () => {
    const agents = ['page-a', 'page-b', 'page-c'].map((n) => env.agent(n));
    for (const agentId of agents) await writeVolatile(agentId, 2);
    const asOf = T0 + 400 * DAY_MS;
    const old = asOf - 366 * DAY_MS;
    const recent = asOf - 10 * DAY_MS;
    const { ledgerRetentionDays, runRetentionDays, auditRetentionDays } = env.client.policy;
    expect([ledgerRetentionDays, runRetentionDays, auditRetentionDays]).toEqual([365, 365, 180]);
    await env.store.ledger.insertMany([
      { _id: 'old', agentId: agents[0]!, at: old, event: 'spill', entryId: 'x', reason: 'fixture' },
      { _id: 'recent', agentId: agents[0]!, at: recent, event: 'spill', entryId: 'y', reason: 'fixture' },
    ]);
    await env.store.runs.insertMany([
      { _id: 'old-run', kind: 'agent', agentId: 'gone', asOf: old },
      { _id: 'recent-run', kind: 'agent', agentId: 'gone', asOf: recent },
    ]);
    await env.store.auditRecords.insertMany([
      { _id: 'old-audit', at: asOf - 181 * DAY_MS },
      { _id: 'recent-audit', at: recent },
    ]);

    // The fixture's and the expiries the phase tests above recorded on day 2.
    const ledgerDue = await env.store.ledger.countDocuments({ at: { $lt: asOf - 365 * DAY_MS } });
    const result = await env.client.temporal.workflow.execute(nightlyConsolidation, {
      workflowId: `nightly-test-${randomUUID()}`,
      taskQueue: env.config.taskQueue,
      args: [{ asOf, agentsPerPage: 2 }],
    });
    // Every agent of this file, over pages of two.
    const registered = await env.store.agents.countDocuments();
    expect(registered).toBeGreaterThan(2);
    expect(result).toMatchObject({ agents: registered, completed: registered, failed: [] });
    for (const agentId of agents) {
      expect(await env.store.runs.countDocuments({ agentId, asOf })).toBe(1);
    }
    const ids = async (c: 'ledger' | 'runs' | 'auditRecords', filter: Record<string, unknown>) =>
      (await env.store[c].find(filter as never, { projection: { _id: 1 } }).toArray())
        .map((d) => d._id)
        .sort();
    expect(await ids('ledger', { reason: 'fixture' })).toEqual(['recent']);
    expect(await ids('runs', { agentId: 'gone' })).toEqual(['recent-run']);
    expect(await ids('auditRecords', {})).toEqual(['recent-audit']);
    const nightly = await env.store.runs.findOne({ kind: 'nightly', asOf });
    expect(nightly?.counts).toMatchObject({ ledgerPruned: ledgerDue, runsPruned: 1, auditPruned: 1 });
  }, 300_000);
});
