import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ForgetActivities } from '../../activities';
import { parseConfig } from '../../core/config';
import { policyOf } from '../../core/policy';
import { forget, type ForgetInput } from '../../workflows/forget';
import { startWorkflowEnv, stubbedWorker, typedFailure } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

const policy = policyOf(parseConfig({}));

type Name = keyof ForgetActivities;
interface Call {
  name: Name;
  input?: unknown;
  attempt: number;
}

/** The erasure's steps, recording each call; `fail` runs first in each and may throw. */
function forgetStubs(fail?: (call: Call) => void) {
  const calls: Call[] = [];
  const hit = (name: Name, input?: unknown) => {
    const call = { name, input, attempt: Context.current().info.attempt };
    calls.push(call);
    fail?.(call);
  };
  const forgetTombstone: ForgetActivities['forgetTombstone'] = async (input) => {
    hit('forgetTombstone', input);
  };
  const currentPolicy: ForgetActivities['currentPolicy'] = async () => {
    hit('currentPolicy');
    return policy;
  };
  const forgetEntry: ForgetActivities['forgetEntry'] = async (input) => {
    hit('forgetEntry', input);
    return { removed: ['s1'], restored: ['f0'], tiers: ['hot', 'cold'], queriesRemoved: 2 };
  };
  const forgetDerived: ForgetActivities['forgetDerived'] = async (input) => {
    hit('forgetDerived', input);
    return { resummarised: ['s2', 's3'], removed: ['s4'], queriesRemoved: 1 };
  };
  const activities: ForgetActivities = { forgetTombstone, currentPolicy, forgetEntry, forgetDerived };
  return { activities, calls };
}

const RESULT = {
  entryId: 'e1',
  resummarised: ['s2', 's3'],
  removed: ['s1', 's4'],
  restored: ['f0'],
  tiers: ['hot', 'cold'],
  queriesRemoved: 3,
};

let seq = 0;
function run(taskQueue: string, input: ForgetInput) {
  return env.client.workflow.execute(forget, {
    taskQueue,
    workflowId: `forget-${Date.now()}-${seq++}`,
    args: [input],
  });
}

describe('forget, with its activities stubbed', () => {
  it('tombstones first, then erases the entry and its summaries under the policy, at one instant', async () => {
    const s = forgetStubs();
    const w = await stubbedWorker(env, s.activities);
    const before = Date.now();
    const result = await w.run(() => run(w.taskQueue, { agentId: 'a1', entryId: 'e1' }));
    expect(result).toEqual(RESULT);
    expect(s.calls.map((c) => c.name)).toEqual([
      'forgetTombstone',
      'currentPolicy',
      'forgetEntry',
      'forgetDerived',
    ]);
    const step = s.calls[0]!.input as { at: number };
    expect(step).toEqual({ agentId: 'a1', entryId: 'e1', at: step.at });
    expect(step.at).toBeGreaterThanOrEqual(before - 1000);
    expect(s.calls[2]!.input).toEqual({ ...step, policy });
    expect(s.calls[3]!.input).toEqual({ ...step, policy });
  });

  it('retries a step that fails once, with the same instant', async () => {
    const s = forgetStubs(({ name, attempt }) => {
      if (name === 'forgetDerived' && attempt === 1) throw new Error('the summariser timed out');
    });
    const w = await stubbedWorker(env, s.activities);
    const result = await w.run(() => run(w.taskQueue, { agentId: 'a1', entryId: 'e1' }));
    expect(result).toEqual(RESULT);
    const derived = s.calls.filter((c) => c.name === 'forgetDerived');
    expect(derived.map((c) => c.attempt)).toEqual([1, 2]);
    expect(derived[1]!.input).toEqual(derived[0]!.input);
    expect(s.calls.filter((c) => c.name === 'forgetEntry')).toHaveLength(1);
  });

  it('fails with the type of a non-retryable step failure, unretried, and erases nothing after it', async () => {
    const s = forgetStubs(({ name }) => {
      if (name === 'forgetTombstone') {
        throw ApplicationFailure.create({ type: 'NotFound', nonRetryable: true, message: 'no entry e1' });
      }
    });
    const w = await stubbedWorker(env, s.activities);
    const err = await w.run(() =>
      run(w.taskQueue, { agentId: 'a1', entryId: 'e1' }).catch((e: unknown) => e),
    );
    expect(typedFailure(err).type).toBe('NotFound');
    expect(s.calls.map((c) => [c.name, c.attempt])).toEqual([['forgetTombstone', 1]]);
  });

  it('fails typed on a bad input, and calls nothing', async () => {
    const s = forgetStubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      for (const input of [
        { agentId: 'a1', entryId: '$where' },
        { agentId: 'a1', entryId: 'e1', extra: true },
      ]) {
        const failure = typedFailure(await run(w.taskQueue, input as ForgetInput).catch((e: unknown) => e));
        expect(failure.type).toBe('InvalidInput');
        expect(failure.nonRetryable).toBe(true);
      }
    });
    expect(s.calls).toHaveLength(0);
  });
});
