import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EraseAgentActivities } from '../../activities';
import type { MemoryErased, RecordsErased } from '../../store/eraseAgent';
import { eraseAgent, type EraseAgentInput } from '../../workflows/eraseAgent';
import { startWorkflowEnv, stubbedWorker, typedFailure } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

type Name = keyof EraseAgentActivities;
interface Call {
  name: Name;
  input: unknown;
  attempt: number;
}

const MEMORY: MemoryErased = { tombstoned: 5, entriesRemoved: 4, vectorsCleared: 3 };
const NOTHING: MemoryErased = { tombstoned: 0, entriesRemoved: 0, vectorsCleared: 0 };
const RECORDS: RecordsErased = {
  queriesRemoved: 2,
  ledgerRemoved: 1,
  termStatsRemoved: 7,
  runsRemoved: 1,
  keysRevoked: ['k1'],
};

/** The erasure's steps, recording each call; `fail` runs first in each and may throw. */
function eraseStubs(opts: { memory?: MemoryErased; fail?: (call: Call) => void } = {}) {
  const calls: Call[] = [];
  const hit = (name: Name, input: unknown) => {
    const call = { name, input, attempt: Context.current().info.attempt };
    calls.push(call);
    opts.fail?.(call);
  };
  const closeAgentWorkflows: EraseAgentActivities['closeAgentWorkflows'] = async (input) => {
    hit('closeAgentWorkflows', input);
    return { workflowsClosed: 2 };
  };
  const eraseAgentMemory: EraseAgentActivities['eraseAgentMemory'] = async (input) => {
    hit('eraseAgentMemory', input);
    return opts.memory ?? MEMORY;
  };
  const eraseAgentRecords: EraseAgentActivities['eraseAgentRecords'] = async (input) => {
    hit('eraseAgentRecords', input);
    return RECORDS;
  };
  const activities: EraseAgentActivities = { closeAgentWorkflows, eraseAgentMemory, eraseAgentRecords };
  return { activities, calls };
}

let seq = 0;
function run(taskQueue: string, input: EraseAgentInput) {
  return env.client.workflow.execute(eraseAgent, {
    taskQueue,
    workflowId: `erase-agent-${Date.now()}-${seq++}`,
    args: [input],
  });
}

describe('eraseAgent, with its activities stubbed', () => {
  it('closes the agent workflows, then erases its memory, then its records, at one instant', async () => {
    const s = eraseStubs();
    const w = await stubbedWorker(env, s.activities);
    const before = Date.now();
    const result = await w.run(() => run(w.taskQueue, { agentId: 'a1' }));
    expect(result).toEqual({ agentId: 'a1', workflowsClosed: 2, ...MEMORY, ...RECORDS });
    expect(s.calls.map((c) => c.name)).toEqual([
      'closeAgentWorkflows',
      'eraseAgentMemory',
      'eraseAgentRecords',
    ]);
    expect(s.calls[0]!.input).toEqual({
      agentId: 'a1',
      ids: ['memgate-agent-a1', 'memgate-reembed-a1'],
      prefixes: ['memgate-consolidate-a1@'],
      windowIdPrefix: 'memgate-window-',
    });
    const { at } = s.calls[1]!.input as { at: number };
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(s.calls[1]!.input).toEqual({ agentId: 'a1', at });
    expect(s.calls[2]!.input).toEqual({ agentId: 'a1', at, erased: true });
  });

  it('tells the last step nothing was erased when the memory was empty', async () => {
    const s = eraseStubs({ memory: NOTHING });
    const w = await stubbedWorker(env, s.activities);
    const result = await w.run(() => run(w.taskQueue, { agentId: 'a2' }));
    expect(result).toEqual({ agentId: 'a2', workflowsClosed: 2, ...NOTHING, ...RECORDS });
    expect(s.calls[2]!.input).toMatchObject({ agentId: 'a2', erased: false });
  });

  it('retries a step that fails once, with the same instant, and does not redo the steps before it', async () => {
    const s = eraseStubs({
      fail: ({ name, attempt }) => {
        if (name === 'eraseAgentMemory' && attempt === 1) throw new Error('the store went away');
      },
    });
    const w = await stubbedWorker(env, s.activities);
    const result = await w.run(() => run(w.taskQueue, { agentId: 'a3' }));
    expect(result).toEqual({ agentId: 'a3', workflowsClosed: 2, ...MEMORY, ...RECORDS });
    expect(s.calls.map((c) => [c.name, c.attempt])).toEqual([
      ['closeAgentWorkflows', 1],
      ['eraseAgentMemory', 1],
      ['eraseAgentMemory', 2],
      ['eraseAgentRecords', 1],
    ]);
    expect(s.calls[2]!.input).toEqual(s.calls[1]!.input);
  });

  it('fails with the type of a non-retryable step failure, unretried', async () => {
    const s = eraseStubs({
      fail: ({ name }) => {
        if (name === 'closeAgentWorkflows') {
          throw ApplicationFailure.create({
            type: 'InvalidInput',
            nonRetryable: true,
            message: 'a bad prefix',
          });
        }
      },
    });
    const w = await stubbedWorker(env, s.activities);
    const err = await w.run(() => run(w.taskQueue, { agentId: 'a4' }).catch((e: unknown) => e));
    expect(typedFailure(err).type).toBe('InvalidInput');
    expect(s.calls.map((c) => [c.name, c.attempt])).toEqual([['closeAgentWorkflows', 1]]);
  });

  it('fails typed on a bad input, and calls nothing', async () => {
    const s = eraseStubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      for (const input of [{ agentId: 'a b' }, { agentId: 'a1', all: true }, {}]) {
        const failure = typedFailure(
          await run(w.taskQueue, input as EraseAgentInput).catch((e: unknown) => e),
        );
        expect(failure.type).toBe('InvalidInput');
        expect(failure.nonRetryable).toBe(true);
      }
    });
    expect(s.calls).toHaveLength(0);
  });
});
