import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReembedActivities } from '../../activities';
import { reembed, type ReembedInput } from '../../workflows/reembed';
import { startWorkflowEnv, stubbedWorker, typedFailure } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

type Name = keyof ReembedActivities;
interface Call {
  name: Name;
  input: unknown;
  attempt: number;
}

/** The two steps, recording each call; `fail` runs first in each and may throw. */
function reembedStubs(fail?: (call: Call) => void) {
  const calls: Call[] = [];
  const hit = (name: Name, input: unknown) => {
    const call = { name, input, attempt: Context.current().info.attempt };
    calls.push(call);
    fail?.(call);
  };
  const markForReembedding: ReembedActivities['markForReembedding'] = async (agentId) => {
    hit('markForReembedding', agentId);
    return 12;
  };
  const reembedAwaiting: ReembedActivities['reembedAwaiting'] = async (input) => {
    hit('reembedAwaiting', input);
    return 11;
  };
  const activities: ReembedActivities = { markForReembedding, reembedAwaiting };
  return { activities, calls };
}

const INPUT: ReembedInput = { agentId: 'a1', model: 'nomic-embed-text' };

let seq = 0;
function run(taskQueue: string, input: ReembedInput) {
  return env.client.workflow.execute(reembed, {
    taskQueue,
    workflowId: `reembed-${Date.now()}-${seq++}`,
    args: [input],
  });
}

describe('reembed, with its activities stubbed', () => {
  it('marks every entry, then embeds them with the model asked for, and says how many', async () => {
    const s = reembedStubs();
    const w = await stubbedWorker(env, s.activities);
    const result = await w.run(() => run(w.taskQueue, INPUT));
    expect(result).toEqual({ agentId: 'a1', model: 'nomic-embed-text', marked: 12, embedded: 11 });
    expect(s.calls.map((c) => [c.name, c.input])).toEqual([
      ['markForReembedding', 'a1'],
      ['reembedAwaiting', INPUT],
    ]);
  });

  it('retries a step that fails once, without marking again', async () => {
    const s = reembedStubs(({ name, attempt }) => {
      if (name === 'reembedAwaiting' && attempt === 1) throw new Error('the endpoint blinked');
    });
    const w = await stubbedWorker(env, s.activities);
    const result = await w.run(() => run(w.taskQueue, INPUT));
    expect(result).toEqual({ agentId: 'a1', model: 'nomic-embed-text', marked: 12, embedded: 11 });
    expect(s.calls.map((c) => [c.name, c.attempt])).toEqual([
      ['markForReembedding', 1],
      ['reembedAwaiting', 1],
      ['reembedAwaiting', 2],
    ]);
  });

  it('fails with the type of a non-retryable step failure, unretried', async () => {
    const s = reembedStubs(({ name }) => {
      if (name === 'reembedAwaiting') {
        throw ApplicationFailure.create({
          type: 'InvalidConfig',
          nonRetryable: true,
          message: 'the worker embeds with another model',
        });
      }
    });
    const w = await stubbedWorker(env, s.activities);
    const err = await w.run(() => run(w.taskQueue, INPUT).catch((e: unknown) => e));
    expect(typedFailure(err).type).toBe('InvalidConfig');
    expect(s.calls.filter((c) => c.name === 'reembedAwaiting')).toHaveLength(1);
  });

  it('fails typed on a bad input, and calls nothing', async () => {
    const s = reembedStubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      for (const input of [
        { agentId: 'a1', model: '' },
        { agentId: { $ne: null }, model: 'm' },
      ]) {
        const failure = typedFailure(await run(w.taskQueue, input as ReembedInput).catch((e: unknown) => e));
        expect(failure.type).toBe('InvalidInput');
        expect(failure.nonRetryable).toBe(true);
      }
    });
    expect(s.calls).toHaveLength(0);
  });
});
