import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemgateClient } from '../../client/client';
import { agentMemory, agentMemoryWorkflowId } from '../../workflows/agentMemory';
import { startTestEnv, type TestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * An agent's memory workflow keeps its history bounded under writes that never pause: it
 * hands over to a new run (continue-as-new) although some write is always pending, and no
 * write is lost or doubled across the hand-overs. The run is started with a low threshold,
 * as Temporal's samples do, so the test reaches the hand-over without 50,000 events.
 */
let env: TestEnv;
let second: MemgateClient;

beforeAll(async () => {
  env = await startTestEnv();
  second = await MemgateClient.connect(env.config, env.endpoints);
});
afterAll(async () => {
  await second?.close();
  await env?.close();
});

describe('agentMemory under sustained writes from two clients', () => {
  it('continues as new, and every write is acknowledged exactly once', async () => {
    const agentId = env.agent('sustained');
    const first = await env.client.temporal.workflow.start(agentMemory, {
      workflowId: agentMemoryWorkflowId(agentId),
      taskQueue: env.config.taskQueue,
      args: [
        {
          agentId,
          continueAsNewAfterBatches: 3,
        },
      ],
    });
    // Two clients, each with writes always in flight: the run never sees an empty queue.
    const stream = (client: MemgateClient, name: string) =>
      Promise.all(
        Array.from({ length: 60 }, (_, w) =>
          client.write({
            agentId,
            entries: Array.from({ length: 3 }, (_, j) => ({
              text: `Stream ${name} write ${w} item ${j}: the parcel went to bay ${w * 3 + j}.`,
              idempotencyKey: `${name}-${w}-${j}`,
            })),
          }),
        ),
      );
    const results = (await Promise.all([stream(env.client, 'a'), stream(second, 'b')])).flat();
    const ids = results.flatMap((r) => r.entries.map((e) => e.id));
    expect(ids).toHaveLength(360);
    expect(new Set(ids).size).toBe(360);
    // `existing` only for a write the server aborted after its local persist, which the client
    // sent again (client/resend.ts): the same ids, stored once.
    expect(
      results.flatMap((r) => r.entries).every((e) => e.status === 'created' || e.status === 'existing'),
    ).toBe(true);
    expect(await env.store.hot.countDocuments({ agentId })).toBe(360);

    // The first run handed over, and so did later ones.
    const firstRun = await env.client.temporal.workflow
      .getHandle(first.workflowId, first.firstExecutionRunId)
      .describe();
    expect(firstRun.status.name).toBe('CONTINUED_AS_NEW');
    const current = await env.client.temporal.workflow.getHandle(first.workflowId).describe();
    expect(current.runId).not.toBe(first.firstExecutionRunId);
    await expectVerified(env, agentId);
  }, 300_000);
});
