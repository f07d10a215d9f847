import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { consolidationRunId } from '../../core/ids';
import { DAY_MS } from '../../core/salience';
import { useTestEnv } from '../support/env';

/**
 * Reclaim trusts the hot count the store keeps, and reads hot only from the oldest write day
 * on, unless the count is in doubt (store/db.ts, `hotCountInDoubt`). An activity that deletes
 * or moves entries and counts them after may stop in between; its retry finds the change made
 * and counts nothing, so the count stays off by it. Every such activity's retry therefore puts
 * the count in doubt, and the next reclaim reads every hot entry and sets it again
 * (test/integration/nightly-store.test.ts). Activities run here one at a time on the real store
 * (`MockActivityEnvironment`), as the given attempt.
 */
const env = useTestEnv();
const T0 = Date.UTC(2026, 0, 5);

function activities() {
  return createActivities({
    store: env.store,
    config: env.config,
    embeddings: env.endpoints.embeddings,
    vectorIndexes: env.client.vectorIndexes,
  });
}

/** An agent with `n` entries in hot, counted as a night would have counted them. */
async function countedAgent(n: number): Promise<{ agentId: string; ids: string[] }> {
  const agentId = `doubt-${randomUUID()}`;
  const { entries } = await env.client.write({
    agentId,
    entries: Array.from({ length: n }, (_, i) => ({
      text: `Pallet ${i} of the harbour shipment weighs ${100 + i} kg.`,
      writtenAt: T0 + i,
    })),
  });
  await env.store.agents.updateOne({ _id: agentId }, { $set: { hot: n, cold: 0, hotWrittenFrom: 0 } });
  return { agentId, ids: entries.map((e) => e.id) };
}

const agentRecord = (agentId: string) => env.store.agents.findOne({ _id: agentId });

describe('a retried activity that changes the tiers', () => {
  it.each(['forgetEntry', 'forgetDerived'] as const)(
    'puts the hot count in doubt when %s runs again after its first attempt stopped',
    async (step) => {
      const { agentId, ids } = await countedAgent(3);
      // What a first attempt that stopped between the delete and its count leaves.
      await env.store.hot.deleteOne({ _id: ids[0]!, agentId });
      const input = { agentId, entryId: ids[0]!, at: T0 + DAY_MS, policy: env.client.policy };

      await new MockActivityEnvironment({ attempt: 2 }).run(activities()[step], input);

      const record = await agentRecord(agentId);
      expect(record?.hotCountInDoubt).toBe(true);
      // The kept count is still the one before the delete: the doubt is what corrects it.
      expect(record?.hot).toBe(3);
    },
  );

  it('leaves the count trusted, and counts the delete, on a first attempt', async () => {
    const { agentId, ids } = await countedAgent(3);
    const input = { agentId, entryId: ids[0]!, at: T0 + DAY_MS, policy: env.client.policy };

    await new MockActivityEnvironment().run(activities().forgetEntry, input);

    const record = await agentRecord(agentId);
    expect(record?.hotCountInDoubt).toBeUndefined();
    expect(record?.hot).toBe(2);
    expect(await env.store.hot.countDocuments({ agentId })).toBe(2);
  });

  it("puts the hot count in doubt when a phase of the agent's night runs again", async () => {
    const { agentId } = await countedAgent(2);
    const asOf = T0 + 2 * DAY_MS;
    const run = { agentId, asOf, runId: consolidationRunId(agentId, asOf), policy: env.client.policy };

    await new MockActivityEnvironment({ attempt: 2 }).run(activities().expirePhase, run);

    expect((await agentRecord(agentId))?.hotCountInDoubt).toBe(true);
  });
});
