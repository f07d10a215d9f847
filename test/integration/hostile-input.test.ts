import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../core/errors';
import { DAY_MS } from '../../core/salience';
import { agentMemoryWorkflowId } from '../../workflows/agentMemory';
import { runMemgate } from '../support/cli';
import { useTestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * Every workflow validates its own input: a caller of the Temporal API (any language, no
 * memgate client) reaches it directly. What it sends must be rejected as InvalidInput with
 * nothing written, nothing erased.
 */
const env = useTestEnv({ MEMGATE_HOT_CAPACITY: '4', MEMGATE_LOW_WATERMARK: '0.5' });

/** An agent with five entries (over its capacity of four) and a logged recall. */
async function agentWithMemories(name: string): Promise<{ agentId: string; ids: string[] }> {
  const agentId = env.agent(name);
  const { entries } = await env.client.write({
    agentId,
    entries: ['alpha', 'bravo', 'charlie', 'delta', 'echo'].map((w, i) => ({
      text: `The ${w} warehouse ships on weekdays.`,
      writtenAt: Date.UTC(2025, 0, 1, i),
    })),
  });
  await env.client.recall({ agentId, query: 'alpha warehouse' });
  return { agentId, ids: entries.map((e) => e.id) };
}

async function untouched(agentId: string, ids: string[]): Promise<void> {
  const hot = await env.store.hot.find({ agentId }).toArray();
  expect(hot.map((e) => e._id).sort()).toEqual([...ids].sort());
  expect(await env.store.cold.countDocuments({ agentId })).toBe(0);
  expect(await env.store.tombstones.countDocuments({ agentId })).toBe(0);
  expect(await env.store.queries.countDocuments({ agentId })).toBe(1);
  await expectVerified(env, agentId);
}

/** The workflow failed with a typed, non-retryable InvalidInput naming the field. */
async function rejectedAsInvalid(result: Promise<unknown>, field: string): Promise<void> {
  const err = await result.then(
    () => expect.unreachable('the workflow accepted hostile input'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  expect((err as WorkflowFailedError).cause).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
  expect((err as WorkflowFailedError).cause!.message).toContain(field);
}

describe('workflow inputs through the raw Temporal client', () => {
  it('forget with a query operator as its entry id erases nothing', async () => {
    const { agentId, ids } = await agentWithMemories('raw-forget');
    const result = env.client.temporal.workflow.execute('forget', {
      taskQueue: env.config.taskQueue,
      workflowId: `hostile-forget-${agentId}`,
      args: [{ agentId, entryId: { $ne: null } }],
    });
    await rejectedAsInvalid(result, 'entryId');
    await untouched(agentId, ids);
  });

  it('restore with a query operator as its entry id changes nothing', async () => {
    const { agentId, ids } = await agentWithMemories('raw-restore');
    const result = env.client.temporal.workflow.execute('restore', {
      taskQueue: env.config.taskQueue,
      workflowId: `hostile-restore-${agentId}`,
      args: [{ agentId, entryId: { $gt: '' }, freshUntil: 'tomorrow' }],
    });
    await rejectedAsInvalid(result, 'entryId');
    await untouched(agentId, ids);
  });

  it('a consolidation dated in the future is refused before it spills anything', async () => {
    const { agentId, ids } = await agentWithMemories('raw-future-night');
    const result = env.client.temporal.workflow.execute('consolidateAgent', {
      taskQueue: env.config.taskQueue,
      workflowId: `hostile-night-${agentId}`,
      args: [{ agentId, asOf: Date.now() + 365 * DAY_MS }],
    });
    await rejectedAsInvalid(result, 'asOf');
    await untouched(agentId, ids);
  });

  it('a write dated in the future is refused by the Update validator', async () => {
    const { agentId, ids } = await agentWithMemories('raw-future-write');
    const err = await env.client.temporal.workflow
      .getHandle(agentMemoryWorkflowId(agentId))
      .executeUpdate('write', {
        args: [{ agentId, entries: [{ text: 'From the future.', writtenAt: Date.now() + 30 * DAY_MS }] }],
      })
      .then(
        () => expect.unreachable('the validator accepted a future writtenAt'),
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
    expect((err as WorkflowUpdateFailedError).cause).toMatchObject({ type: 'InvalidInput' });
    expect((err as WorkflowUpdateFailedError).cause!.message).toContain('entries.0.writtenAt');
    await untouched(agentId, ids);
  });
});

describe('writes over the byte limit (Temporal refuses payloads over 2 MB)', () => {
  // 40 entries of 15,000 two-byte characters: each within the character limit, 1.2 MB in all.
  const oversized = (agentId: string) => ({
    agentId,
    entries: Array.from({ length: 40 }, (_, i) => ({ text: `${i} ${'é'.repeat(15_000)}` })),
  });

  it('the Update validator refuses one, naming the limit, before it reaches history', async () => {
    const { agentId, ids } = await agentWithMemories('raw-oversized');
    const err = await env.client.temporal.workflow
      .getHandle(agentMemoryWorkflowId(agentId))
      .executeUpdate('write', { args: [oversized(agentId)] })
      .then(
        () => expect.unreachable('the validator accepted 1.2 MB'),
        (e: unknown) => e,
      );
    expect((err as WorkflowUpdateFailedError).cause).toMatchObject({ type: 'InvalidInput' });
    expect((err as WorkflowUpdateFailedError).cause!.message).toContain('1048576');
    await untouched(agentId, ids);
  });

  it('MemgateClient refuses one before sending anything', async () => {
    const { agentId, ids } = await agentWithMemories('client-oversized');
    await expect(env.client.write(oversized(agentId))).rejects.toThrow(InvalidInputError);
    await untouched(agentId, ids);
  });
});

describe('the same inputs through MemgateClient and the CLI', () => {
  it('MemgateClient refuses a write dated in the future, and a night dated in the future', async () => {
    const { agentId, ids } = await agentWithMemories('client-future');
    await expect(
      env.client.write({ agentId, entries: [{ text: 'From the future.', writtenAt: Date.now() + DAY_MS }] }),
    ).rejects.toThrow(InvalidInputError);
    await expect(env.client.consolidate({ agentId, asOf: Date.now() + DAY_MS })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(env.client.forget({ agentId, entryId: '{"$ne":null}' })).rejects.toThrow(InvalidInputError);
    await untouched(agentId, ids);
  });

  it('the CLI exits 2 naming the field, and changes nothing', async () => {
    const { agentId, ids } = await agentWithMemories('cli-hostile');
    const night = await runMemgate(env, [
      'consolidate',
      '--agent',
      agentId,
      '--as-of',
      '2999-01-01T00:00:00Z',
    ]);
    expect(night.code).toBe(2);
    expect(night.stderr).toContain('asOf');
    const erase = await runMemgate(env, ['forget', '--agent', agentId, '{"$ne":null}']);
    expect(erase.code).toBe(2);
    expect(erase.stderr).toContain('entryId');
    await untouched(agentId, ids);
  });
});
