import { Context } from '@temporalio/activity';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { WriteActivities } from '../../activities';
import { parseConfig } from '../../core/config';
import type { WriteRequest, WriteRequestInput } from '../../core/entry';
import { policyOf, type Policy } from '../../core/policy';
import type { WriteUpdate } from '../../core/sealed';
import { agentMemory, writeUpdate, type AgentMemoryInput } from '../../workflows/agentMemory';
import { startWorkflowEnv, stubbedWorker, updateFailure } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

const policy = policyOf(parseConfig({}));

interface Log {
  policyReads: number;
  registered: string[];
  persisted: { requests: WriteUpdate[]; policy: Policy; runId?: string; attempt: number }[];
  embedded: { agentId: string; ids: string[]; runId?: string; at: number }[];
}

/** The run of the workflow that called the activity stub. */
function callerRun(): string | undefined {
  return Context.current().info.workflowExecution?.runId;
}

/** The write path's activities, recording what reached them; `overrides` replace the defaults. */
function stubs(overrides: Partial<WriteActivities> = {}) {
  const log: Log = { policyReads: 0, registered: [], persisted: [], embedded: [] };
  const currentPolicy: WriteActivities['currentPolicy'] = async () => {
    log.policyReads++;
    return policy;
  };
  const registerAgent: WriteActivities['registerAgent'] = async (agentId) => {
    log.registered.push(agentId);
  };
  const persistWrites: WriteActivities['persistWrites'] = async (requests, p) => {
    log.persisted.push({ requests, policy: p, runId: callerRun(), attempt: Context.current().info.attempt });
    return requests.map((r) => r.entries.map((e) => ({ id: idOf(e), status: 'created' as const })));
  };
  const embedEntries: WriteActivities['embedEntries'] = async (input) => {
    log.embedded.push({ ...input, runId: callerRun(), at: Date.now() });
    return { embedded: input.ids.length };
  };
  return { log, activities: { currentPolicy, registerAgent, persistWrites, embedEntries, ...overrides } };
}

/** The stubs name an entry after its text, so a test knows every id in advance. */
function idOf(e: WriteUpdate['entries'][number]): string {
  return 'text' in e ? e.text : e.id;
}

let seq = 0;
function startAgent(taskQueue: string, input: AgentMemoryInput) {
  return env.client.workflow.start(agentMemory, {
    taskQueue,
    workflowId: `agent-memory-${input.agentId}-${Date.now()}-${seq++}`,
    args: [input],
  });
}

function write(h: WorkflowHandle<typeof agentMemory>, agentId: string, ...texts: string[]) {
  const request: WriteRequestInput = { agentId, entries: texts.map((text) => ({ text })) };
  return h.executeUpdate(writeUpdate, { args: [request] });
}

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

async function events(h: WorkflowHandle, runId?: string): Promise<HistoryEvent[]> {
  const history = await env.client.workflow.getHandle(h.workflowId, runId).fetchHistory();
  return history.events ?? [];
}

/** What the run handed to the next one: the input of its continue-as-new. */
async function handedOver(h: WorkflowHandle, runId: string): Promise<AgentMemoryInput> {
  const attrs = (await events(h, runId)).find(
    (e) => e.workflowExecutionContinuedAsNewEventAttributes,
  )?.workflowExecutionContinuedAsNewEventAttributes;
  expect(attrs).toBeDefined();
  return defaultPayloadConverter.fromPayload(attrs!.input!.payloads![0]!);
}

/** The run's history replays on the code that wrote it (its new branches are deterministic). */
async function replays(h: WorkflowHandle): Promise<void> {
  const workflowBundle = { codePath: inject('workflowsBundlePath') };
  await Worker.runReplayHistory({ workflowBundle }, await h.fetchHistory());
}

async function nextRunId(h: WorkflowHandle, after: string): Promise<string> {
  let runId = after;
  await vi.waitFor(
    async () => {
      runId = (await h.describe()).runId;
      expect(runId).not.toBe(after);
    },
    { timeout: 10_000, interval: 100 },
  );
  return runId;
}

describe('agentMemory, with its activities stubbed', () => {
  it('acknowledges writes once persisted, registers once, and embeds the created ids once writes pause', async () => {
    const s = stubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-1' });
      await expect(write(h, 'am-1', 'alpha', 'beta')).resolves.toEqual({
        entries: [
          { id: 'alpha', status: 'created' },
          { id: 'beta', status: 'created' },
        ],
      });
      await expect(write(h, 'am-1', 'gamma')).resolves.toEqual({
        entries: [{ id: 'gamma', status: 'created' }],
      });
      const ackedAt = Date.now();
      expect(s.log.policyReads).toBe(1);
      expect(s.log.registered).toEqual(['am-1']);
      expect(s.log.persisted).toHaveLength(2);
      expect(s.log.persisted.map((p) => p.policy)).toEqual([policy, policy]);
      // Parsed with its defaults, and dated inside history.
      const first = s.log.persisted[0]!.requests[0] as WriteRequest;
      expect(first.entries[0]).toMatchObject({
        text: 'alpha',
        kind: 'episode',
        salience: 0.5,
        source: { origin: 'agent' },
      });
      expect(first.entries[0]!.writtenAt).toBeGreaterThan(ackedAt - 60_000);
      // Nothing was embedded while the writes came; then one call takes every created id.
      expect(s.log.embedded).toHaveLength(0);
      await vi.waitFor(() => expect(s.log.embedded).toHaveLength(1), { timeout: 10_000, interval: 50 });
      expect(s.log.embedded[0]).toMatchObject({ agentId: 'am-1', ids: ['alpha', 'beta', 'gamma'] });
      expect(s.log.embedded[0]!.at - ackedAt).toBeGreaterThanOrEqual(900);
      await h.terminate();
      await replays(h);
    });
  });

  it('embeds an entry a write finds stored already, which a persist retried after it was stored finds so, and not a deleted one', async () => {
    const s = stubs({
      persistWrites: async (requests) =>
        requests.map((r) =>
          r.entries.map((e) => {
            const id = idOf(e);
            return { id, status: id === 'gone' ? ('deleted' as const) : ('existing' as const) };
          }),
        ),
    });
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-existing' });
      await expect(write(h, 'am-existing', 'stored', 'gone')).resolves.toEqual({
        entries: [
          { id: 'stored', status: 'existing' },
          { id: 'gone', status: 'deleted' },
        ],
      });
      await vi.waitFor(() => expect(s.log.embedded).toHaveLength(1), { timeout: 10_000, interval: 50 });
      expect(s.log.embedded[0]).toMatchObject({ agentId: 'am-existing', ids: ['stored'] });
      await h.terminate();
      await replays(h);
    });
  });

  it('under writes that go on, looks for their pause at doubling intervals, not every second, and still embeds once they stop', async () => {
    const s = stubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-9' });
      // Five seconds of writes, one every 200 ms: never a second without one.
      const texts: string[] = [];
      const until = Date.now() + 5_000;
      for (let i = 0; Date.now() < until; i++) {
        texts.push(`w${i}`);
        await write(h, 'am-9', `w${i}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      await vi.waitFor(() => expect(s.log.embedded).toHaveLength(1), { timeout: 20_000, interval: 50 });
      expect(s.log.embedded[0]!.ids).toEqual(texts);
      const history = await events(h);
      const lastWrite = history
        .map((e) => !!e.workflowExecutionUpdateCompletedEventAttributes)
        .lastIndexOf(true);
      const firedWhileWriting = history.slice(0, lastWrite).filter((e) => e.timerFiredEventAttributes);
      // Once a second would wake the run five times; at 1, 2 and 4 s it wakes at 1 and 3 s.
      expect(firedWhileWriting.length).toBeLessThanOrEqual(2);
      await h.terminate();
    });
  }, 30_000);

  it('rejects a bad write in the validator, before anything reaches an activity or history', async () => {
    const s = stubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-2' });
      const foreign = await updateFailure(write(h, 'someone-else', 'alpha'));
      expect(foreign.type).toBe('InvalidInput');
      expect(foreign.message).toContain('someone-else');
      expect((await updateFailure(write(h, 'am-2'))).type).toBe('InvalidInput');
      const outOfRange = h.executeUpdate(writeUpdate, {
        args: [{ agentId: 'am-2', entries: [{ text: 'alpha', salience: 2 }] }],
      });
      expect((await updateFailure(outOfRange)).type).toBe('InvalidInput');
      expect(s.log.persisted).toHaveLength(0);
      expect(s.log.registered).toHaveLength(0);
      const history = await events(h);
      expect(history.some((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toBe(false);
      // The run still takes a good write.
      await expect(write(h, 'am-2', 'alpha')).resolves.toEqual({
        entries: [{ id: 'alpha', status: 'created' }],
      });
      await h.terminate();
    });
  });

  it('fails typed, before reading the policy, on a bad workflow input', async () => {
    const s = stubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      for (const input of [{ agentId: 'not an id' }, { agentId: 'am-3', continueAsNewAfterBatches: 0 }]) {
        const err = await env.client.workflow
          .execute(agentMemory, {
            taskQueue: w.taskQueue,
            workflowId: `agent-memory-bad-${Date.now()}-${seq++}`,
            args: [input],
          })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        const cause = (err as WorkflowFailedError).cause;
        expect(cause).toBeInstanceOf(ApplicationFailure);
        expect((cause as ApplicationFailure).type).toBe('InvalidInput');
        expect((cause as ApplicationFailure).nonRetryable).toBe(true);
      }
    });
    expect(s.log.policyReads).toBe(0);
  });

  it('retries a persist that fails retryably, and answers the Update once it succeeds', async () => {
    let attempts = 0;
    const base = stubs();
    const persistWrites: WriteActivities['persistWrites'] = async (requests, p) => {
      attempts++;
      if (attempts === 1) throw new Error('the store went away');
      return base.activities.persistWrites(requests, p);
    };
    const s = stubs({ persistWrites });
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-4' });
      await expect(write(h, 'am-4', 'alpha')).resolves.toEqual({
        entries: [{ id: 'alpha', status: 'created' }],
      });
      await h.terminate();
    });
    expect(attempts).toBe(2);
    expect(base.log.persisted.map((p) => p.attempt)).toEqual([2]);
  });

  it('fails only that Update, with its type and unretried, on a typed non-retryable persist failure', async () => {
    const s = stubs();
    let poisoned = 0;
    const persistWrites: WriteActivities['persistWrites'] = async (requests, p) => {
      if (requests.some((r) => r.entries.some((e) => idOf(e) === 'poison'))) {
        poisoned++;
        throw ApplicationFailure.create({
          type: 'InvalidInput',
          nonRetryable: true,
          message: 'a sealed entry does not open',
        });
      }
      return s.activities.persistWrites(requests, p);
    };
    const w = await stubbedWorker(env, { ...s.activities, persistWrites });
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-5' });
      const failure = await updateFailure(write(h, 'am-5', 'poison'));
      expect(failure.type).toBe('InvalidInput');
      expect(failure.message).toContain('does not open');
      expect(poisoned).toBe(1);
      await expect(write(h, 'am-5', 'alpha')).resolves.toEqual({
        entries: [{ id: 'alpha', status: 'created' }],
      });
      await h.terminate();
    });
  });

  it('fails only the write whose entries the persist refuses, and persists the others of its batch', async () => {
    const s = stubs();
    const batches: string[][] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const persistWrites: WriteActivities['persistWrites'] = async (requests, p) => {
      batches.push(requests.flatMap((r) => r.entries.map(idOf)));
      if (batches.length === 1) await held;
      const persisted = await s.activities.persistWrites(requests, p);
      // As the activity answers a write whose sealed entry does not open: that write alone.
      return requests.map((r, i) =>
        r.entries.some((e) => idOf(e) === 'poison')
          ? {
              invalid: {
                message: 'invalid write: entries.0.sealed: does not open under the key of its id',
                issues: [{ path: 'entries.0.sealed', message: 'does not open under the key of its id' }],
              },
            }
          : persisted[i]!,
      );
    };
    const w = await stubbedWorker(env, { ...s.activities, persistWrites });
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-10' });
      const first = write(h, 'am-10', 'first');
      await vi.waitFor(() => expect(batches).toHaveLength(1), { timeout: 10_000, interval: 50 });
      // Both reach the server while the first persist runs, so they share the next batch.
      const poisoned = updateFailure(write(h, 'am-10', 'poison'));
      const valid = write(h, 'am-10', 'alpha');
      await new Promise((r) => setTimeout(r, 1_000));
      release();
      await expect(first).resolves.toEqual({ entries: [{ id: 'first', status: 'created' }] });
      await expect(valid).resolves.toEqual({ entries: [{ id: 'alpha', status: 'created' }] });
      const failure = await poisoned;
      expect(failure.type).toBe('InvalidInput');
      expect(failure.nonRetryable).toBe(true);
      expect(failure.message).toContain('does not open');
      expect(failure.details).toEqual([
        { issues: [{ path: 'entries.0.sealed', message: 'does not open under the key of its id' }] },
      ]);
      expect(batches.map((b) => [...b].sort())).toEqual([['first'], ['alpha', 'poison']]);
      await vi.waitFor(() => expect(s.log.embedded.flatMap((e) => e.ids)).toEqual(['first', 'alpha']), {
        timeout: 10_000,
        interval: 50,
      });
      await h.terminate();
      await replays(h);
    });
  });

  it('stays running when registering the agent fails every attempt: the write fails retryable, and the next one is persisted once the store is back', async () => {
    let storeDown = true;
    let attempts = 0;
    const s = stubs({
      registerAgent: async (agentId) => {
        attempts++;
        if (storeDown) throw new Error('the store is down');
        s.log.registered.push(agentId);
      },
    });
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-11' });
      const failure = await updateFailure(write(h, 'am-11', 'alpha'));
      expect(failure.type).toBe('StackUnavailable');
      expect(failure.nonRetryable).toBe(false);
      expect(failure.message).toContain('the store is down');
      expect(attempts).toBe(5);
      expect(s.log.persisted).toHaveLength(0);
      expect((await h.describe()).status.name).toBe('RUNNING');
      storeDown = false;
      await expect(write(h, 'am-11', 'beta')).resolves.toEqual({
        entries: [{ id: 'beta', status: 'created' }],
      });
      expect(s.log.registered).toEqual(['am-11']);
      await h.terminate();
      await replays(h);
    });
  });

  it('stays running when reading the policy fails every attempt: a waiting write fails retryable, and the next one reads it again', async () => {
    let storeDown = true;
    let attempts = 0;
    const s = stubs({
      currentPolicy: async () => {
        attempts++;
        if (storeDown) throw new Error('the store is down');
        s.log.policyReads++;
        return policy;
      },
    });
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-12', unembedded: ['carried'] });
      const failure = await updateFailure(write(h, 'am-12', 'alpha'));
      expect(failure.type).toBe('StackUnavailable');
      expect(failure.nonRetryable).toBe(false);
      expect(failure.message).toContain('the store is down');
      // Five attempts a read: the one the run began with, and one for the write if it came after.
      expect(attempts % 5).toBe(0);
      // No write waits, so the run does not read again until one comes.
      const tried = attempts;
      await new Promise((r) => setTimeout(r, 1_000));
      expect(attempts).toBe(tried);
      expect((await h.describe()).status.name).toBe('RUNNING');
      storeDown = false;
      await expect(write(h, 'am-12', 'beta')).resolves.toEqual({
        entries: [{ id: 'beta', status: 'created' }],
      });
      expect(s.log.policyReads).toBe(1);
      await vi.waitFor(
        () => expect(s.log.embedded.flatMap((e) => e.ids).sort()).toEqual(['beta', 'carried']),
        {
          timeout: 10_000,
          interval: 50,
        },
      );
      await h.terminate();
    });
  });

  it('fails the Update, retryable, once the persist has failed every attempt', async () => {
    const s = stubs();
    let attempts = 0;
    const persistWrites: WriteActivities['persistWrites'] = async () => {
      attempts++;
      throw new Error('the store is down');
    };
    const w = await stubbedWorker(env, { ...s.activities, persistWrites });
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-6' });
      const failure = await updateFailure(write(h, 'am-6', 'alpha'));
      // An untyped error (the SDK types it 'Error') is told as the closed list's StackUnavailable.
      expect(failure.type).toBe('StackUnavailable');
      expect(failure.nonRetryable).toBe(false);
      expect(failure.message).toContain('retrying it is safe');
      expect(failure.message).toContain('the store is down');
      await h.terminate();
    });
    expect(attempts).toBe(5);
  });

  it('stops embedding once the worker says embeddings are unavailable, and carries nothing over', async () => {
    const s = stubs({
      embedEntries: async (input) => {
        s.log.embedded.push({ ...input, runId: callerRun(), at: Date.now() });
        return { unavailable: 'no embeddings endpoint on this worker' };
      },
    });
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-7', continueAsNewAfterBatches: 2 });
      await write(h, 'am-7', 'alpha');
      await vi.waitFor(() => expect(s.log.embedded).toHaveLength(1), { timeout: 10_000, interval: 50 });
      // The answer is in the run's state (a workflow task after the activity's completion)
      // before the next write's entries are counted.
      await vi.waitFor(
        async () => {
          const history = await events(h);
          const done = history.findIndex((e) => e.activityTaskCompletedEventAttributes);
          expect(done).toBeGreaterThan(-1);
          expect(history.slice(done).some((e) => e.workflowTaskCompletedEventAttributes)).toBe(true);
        },
        { timeout: 10_000, interval: 50 },
      );
      await write(h, 'am-7', 'beta');
      // The second batch hands over; "beta" was not queued for an embedding call.
      await nextRunId(h, h.firstExecutionRunId);
      const next = await handedOver(h, h.firstExecutionRunId);
      expect(next).toEqual({ agentId: 'am-7', continueAsNewAfterBatches: 2 });
      expect(s.log.embedded.map((e) => e.ids)).toEqual([['alpha']]);
      await h.terminate();
    });
  });

  it('hands the unembedded ids over on continue-as-new, and the next run takes the writes and embeds them', async () => {
    const s = stubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const h = await startAgent(w.taskQueue, { agentId: 'am-8', continueAsNewAfterBatches: 1 });
      const firstRun = h.firstExecutionRunId;
      await write(h, 'am-8', 'alpha');
      const secondRun = await nextRunId(h, firstRun);
      // Handed over within the quiet time, before the first run could embed.
      expect(await handedOver(h, firstRun)).toEqual({
        agentId: 'am-8',
        continueAsNewAfterBatches: 1,
        unembedded: ['alpha'],
      });
      await expect(write(h, 'am-8', 'beta')).resolves.toEqual({
        entries: [{ id: 'beta', status: 'created' }],
      });
      expect(s.log.persisted.map((p) => [idOf(p.requests[0]!.entries[0]!), p.runId])).toEqual([
        ['alpha', firstRun],
        ['beta', secondRun],
      ]);
      await vi.waitFor(() => expect(s.log.embedded.flatMap((e) => e.ids).sort()).toEqual(['alpha', 'beta']), {
        timeout: 10_000,
        interval: 50,
      });
      expect(s.log.embedded.every((e) => e.runId !== firstRun)).toBe(true);
      // One registration per run.
      expect(s.log.registered).toEqual(['am-8', 'am-8']);
      await h.terminate();
    });
  });
});
