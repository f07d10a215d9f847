import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { toMemgateError } from '../../client/errors';
import { sealWrite } from '../../codec/sealedEntry';
import { writeEntrySchema, type Entry } from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { writeLimitsOf } from '../../core/policy';
import { DAY_MS } from '../../core/salience';
import { agentMemoryWorkflowId, writeUpdate } from '../../workflows/agentMemory';
import { runMemgate } from '../support/cli';
import { useTestEnv } from '../support/env';
import { interleaveOnce } from '../support/faults';
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

  it('restore renewing a fact until a time already past is refused by its activity, typed, and changes nothing', async () => {
    const { agentId, ids } = await agentWithMemories('raw-restore-past');
    const err = await env.client.temporal.workflow
      .execute('restore', {
        taskQueue: env.config.taskQueue,
        workflowId: `hostile-restore-past-${agentId}`,
        args: [{ agentId, entryId: ids[0], freshUntil: 0 }],
      })
      .then(
        () => expect.unreachable('the restore took a past freshUntil'),
        (e: unknown) => e,
      );
    const typed = toMemgateError(err);
    expect(typed).toBeInstanceOf(InvalidInputError);
    expect((typed as InvalidInputError).issues.map((i) => i.path)).toEqual(['freshUntil']);
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

  it("MemgateClient takes an entry at the byte limit, coalesced into one Update with other callers' writes", async () => {
    const agentId = env.agent('client-at-limit');
    // 65,436 bytes as JSON; the client seals it with its defaults and date, larger still.
    const big = { text: `x${'\u0001'.repeat(10_904)}` };
    const first = env.client.write({ agentId, entries: [{ text: 'The first write goes out at once.' }] });
    // These two wait for it, and ride together in the next Update.
    const together = [
      env.client.write({ agentId, entries: [big] }),
      env.client.write({ agentId, entries: [{ text: 'A small write beside it.' }] }),
    ];
    for (const result of await Promise.all([first, ...together])) {
      expect(result.entries).toMatchObject([{ status: 'created' }]);
    }
    expect(await env.store.hot.countDocuments({ agentId })).toBe(3);
  });
});

describe('a write the persist refuses, in one batch with others', () => {
  it('fails alone, typed, and the other writes of its batch are persisted', async () => {
    const agentId = env.agent('shared-batch');
    const handle = env.client.temporal.workflow.getHandle(agentMemoryWorkflowId(agentId));
    // Sealed as the client seals it, but sent through the raw Temporal client, past its checks:
    // the workflow takes a sealed write by its envelope, and only the persist opens it.
    const sealed = (text: string, writtenAt: number) =>
      sealWrite(env.store, agentId, [
        writeEntrySchema(writeLimitsOf(env.client.policy)).parse({ text, writtenAt }),
      ]);
    const ahead = await sealed('Dated a day ahead of every clock.', Date.now() + DAY_MS);
    const beside = await sealed('Sent beside it.', Date.now());
    // The first persist is held until both wait behind it, so they share the next batch.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let holding!: () => void;
    const held = new Promise<void>((r) => (holding = r));
    const undo = interleaveOnce(
      env.worker.store,
      'hot',
      'insertMany',
      async () => {
        holding();
        await released;
      },
      (args) => (args[0] as Entry[])[0]?.agentId === agentId,
    );
    try {
      const first = env.client.write({ agentId, entries: [{ text: 'The first write of the agent.' }] });
      await held;
      const refused = handle.executeUpdate(writeUpdate, { args: [ahead] }).then(
        () => expect.unreachable('the persist took a write dated a day ahead'),
        (e: unknown) => e,
      );
      const taken = handle.executeUpdate(writeUpdate, { args: [beside] });
      await new Promise((r) => setTimeout(r, 1_000));
      release();
      expect((await first).entries).toMatchObject([{ status: 'created' }]);
      expect((await taken).entries).toEqual([{ id: beside.entries[0]!.id, status: 'created' }]);
      const err = await refused;
      expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
      expect((err as WorkflowUpdateFailedError).cause).toMatchObject({
        type: 'InvalidInput',
        nonRetryable: true,
      });
      expect((err as WorkflowUpdateFailedError).cause!.message).toContain('entries.0.writtenAt');
    } finally {
      undo();
    }
    expect(await env.store.hot.countDocuments({ agentId })).toBe(2);
    expect(await env.store.hot.countDocuments({ _id: ahead.entries[0]!.id })).toBe(0);
    // They shared one batch: two persists in all.
    const persists = ((await handle.fetchHistory()).events ?? []).filter((e) =>
      Buffer.from(e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data ?? [])
        .toString('utf8')
        .includes('"activity_type":"persistWrites"'),
    );
    expect(persists).toHaveLength(2);
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

  it('MemgateClient refuses a lone surrogate in a write and in a recall, naming the field, and keeps nothing', async () => {
    const { agentId, ids } = await agentWithMemories('client-lone-surrogate');
    const refused = async (call: Promise<unknown>) => {
      const err = await call.then(
        () => expect.unreachable('a lone surrogate was taken'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidInputError);
      return (err as InvalidInputError).issues.map((i) => i.path);
    };
    expect(
      await refused(env.client.write({ agentId, entries: [{ text: 'The alpha\ud800 dock.' }] })),
    ).toEqual(['entries.0.text']);
    expect(await refused(env.client.recall({ agentId, query: 'alpha \udfff warehouse' }))).toEqual(['query']);
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
