import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { WriteActivities } from '../../activities';
import { parseConfig } from '../../core/config';
import type { WriteRequestInput } from '../../core/entry';
import { policyOf } from '../../core/policy';
import { workerDeploymentOf } from '../../worker/worker';
import { agentMemory, writeUpdate } from '../../workflows/agentMemory';
import { handOverSignal } from '../../workflows/support';
import { startWorkflowEnv, updateFailure } from '../support/stubbedWorker';
import { buildIdOf, setCurrentVersion } from '../support/versions';

/**
 * An agent's run hands over to the current version of the workers (docs/versioning.md) even
 * while the store is down as it begins and it has not read its policy: before, such a run
 * looked for a hand-over only once it had read one, and stayed on its version, taking writes
 * it could only fail, for as long as the outage lasted (and past the server's bound on the
 * Updates of one run, for good).
 */
const POLICY = policyOf(parseConfig({}));

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

/** The write path's activities of one version; `storeDown` fails every policy read. */
function stubs(state: { storeDown: boolean }, embedded: string[]): WriteActivities {
  const currentPolicy: WriteActivities['currentPolicy'] = async () => {
    if (state.storeDown) throw new Error('the store is down');
    return POLICY;
  };
  const registerAgent: WriteActivities['registerAgent'] = async () => undefined;
  const persistWrites: WriteActivities['persistWrites'] = async (requests) =>
    requests.map((r) =>
      r.entries.map((e) => ({ id: 'text' in e ? e.text : e.id, status: 'created' as const })),
    );
  const embedEntries: WriteActivities['embedEntries'] = async ({ ids }) => {
    embedded.push(...ids.map((id) => `${id}@${Context.current().info.workflowExecution?.runId}`));
    return { embedded: ids.length };
  };
  return { currentPolicy, registerAgent, persistWrites, embedEntries } as WriteActivities;
}

describe('an agent run that has not read its policy', () => {
  it('hands over to the current version when woken, and the next run takes writes and embeds them', async () => {
    const taskQueue = `handover-${randomUUID().slice(0, 8)}`;
    const deployment = (buildId: string) =>
      workerDeploymentOf(parseConfig({ MEMGATE_TASK_QUEUE: taskQueue }), buildId);
    const workflowBundle = { codePath: inject('workflowsBundlePath') };
    const store = { storeDown: true };
    const embedded: string[] = [];
    const worker = (buildId: string) =>
      Worker.create({
        connection: env.nativeConnection,
        taskQueue,
        workflowBundle,
        activities: stubs(store, embedded),
        workerDeploymentOptions: deployment(buildId),
      });
    const [v1, v2] = [await worker('v1'), await worker('v2')];
    const agentId = `handover-${taskQueue}`;
    const request: WriteRequestInput = { agentId, entries: [{ text: 'alpha' }] };

    await v1.runUntil(async () => {
      await setCurrentVersion(env, taskQueue, 'v1');
      const h = await env.client.workflow.start(agentMemory, {
        taskQueue,
        workflowId: `agent-${taskQueue}`,
        args: [{ agentId, unembedded: ['carried'] }],
      });
      const first = h.firstExecutionRunId;
      expect((await updateFailure(h.executeUpdate(writeUpdate, { args: [request] }))).type).toBe(
        'StackUnavailable',
      );
      expect(await buildIdOf(env, h.workflowId)).toBe('v1');

      await v2.runUntil(async () => {
        await setCurrentVersion(env, taskQueue, 'v2');
        store.storeDown = false;
        // `memgate hand-over` wakes it.
        await h.signal(handOverSignal);
        await vi.waitFor(
          async () => {
            expect((await h.describe()).runId).not.toBe(first);
            expect(await buildIdOf(env, h.workflowId)).toBe('v2');
          },
          { timeout: 20_000, interval: 200 },
        );
        await expect(h.executeUpdate(writeUpdate, { args: [request] })).resolves.toEqual({
          entries: [{ id: 'alpha', status: 'created' }],
        });
        const next = (await h.describe()).runId;
        // What the first run was given to embed is embedded once, by whichever run held it then.
        await vi.waitFor(
          () => {
            expect(embedded).toContain(`alpha@${next}`);
            expect(embedded.filter((e) => e.startsWith('carried@'))).toHaveLength(1);
          },
          { timeout: 20_000, interval: 200 },
        );
        await h.terminate();
        // The run that handed over replays on the code that wrote it.
        const handedOver = await env.client.workflow.getHandle(h.workflowId, first).fetchHistory();
        await Worker.runReplayHistory({ workflowBundle }, handedOver);
      });
    });
  }, 120_000);
});
