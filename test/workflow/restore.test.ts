import { ApplicationFailure } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RestoreActivities } from '../../activities';
import { restore } from '../../workflows/restore';
import { startWorkflowEnv, stubbedWorker } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

type RestoreEntry = RestoreActivities['restoreEntry'];
const restored: Awaited<ReturnType<RestoreEntry>> = {
  entryId: 'e1',
  restored: true,
} as unknown as Awaited<ReturnType<RestoreEntry>>;

describe('restore, with its activity stubbed', () => {
  it('hands the activity the input and the instant the workflow fixed', async () => {
    const calls: Parameters<RestoreEntry>[0][] = [];
    const restoreEntry: RestoreEntry = async (step) => {
      calls.push(step);
      return restored;
    };
    const w = await stubbedWorker(env, { restoreEntry });
    const before = Date.now();
    const result = await w.run(() =>
      env.client.workflow.execute(restore, {
        taskQueue: w.taskQueue,
        workflowId: `restore-${before}`,
        args: [{ agentId: 'a1', entryId: 'e1' }],
      }),
    );
    expect(result).toEqual(restored);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ agentId: 'a1', entryId: 'e1' });
    expect(calls[0]!.at).toBeGreaterThanOrEqual(before - 1000);
  });

  it('retries a failing step, and fails typed, unretried, on a bad input', async () => {
    let attempts = 0;
    const restoreEntry: RestoreEntry = async () => {
      attempts++;
      if (attempts === 1) throw new Error('the store went away');
      return restored;
    };
    const w = await stubbedWorker(env, { restoreEntry });
    await w.run(async () => {
      await expect(
        env.client.workflow.execute(restore, {
          taskQueue: w.taskQueue,
          workflowId: `restore-retried-${Date.now()}`,
          args: [{ agentId: 'a1', entryId: 'e1' }],
        }),
      ).resolves.toEqual(restored);
      expect(attempts).toBe(2);
      const failure = await env.client.workflow
        .execute(restore, {
          taskQueue: w.taskQueue,
          workflowId: `restore-bad-${Date.now()}`,
          args: [{ agentId: 'a1', entryId: 'e1', extra: true } as never],
        })
        .catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(WorkflowFailedError);
      const cause = (failure as WorkflowFailedError).cause;
      expect(cause).toBeInstanceOf(ApplicationFailure);
      expect((cause as ApplicationFailure).type).toBe('InvalidInput');
      expect((cause as ApplicationFailure).nonRetryable).toBe(true);
    });
    expect(attempts).toBe(2);
  });
});
