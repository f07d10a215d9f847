import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { Worker, type History } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WindowClient } from '../../client/window';
import { ContentCodec } from '../../codec/payloadCodec';
import { ConflictError, MemgateError } from '../../core/errors';
import {
  admit,
  advanceTurn,
  openWindow,
  rehydrate,
  summariseWindow,
  unpin,
  viewWindow,
  type Transition,
  type WindowState,
} from '../../core/window';
import {
  contextWindow,
  contextWindowWorkflowId,
  type ContextWindowInput,
} from '../../workflows/contextWindow';
import { runMemgate } from '../support/cli';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * A context window session long enough to evict past the default retention (1,000 records),
 * started with a low continue-as-new threshold, as Temporal's samples do, so it hands over
 * several times without 50,000 events. What each run carries stays bounded, the run after
 * a hand-over decides exactly as the pure core does with the same operations, and a close
 * ends the session.
 */
let env: TestEnv;
let windows: WindowClient;

beforeAll(async () => {
  env = await startTestEnv();
  windows = new WindowClient(env.client.temporal, env.config);
});
afterAll(async () => {
  await env?.close();
});

const SETTINGS = { capacity: 1_000, decay: 0.85, rehydrationThreshold: 0.5, margin: 0.1 };
const HAND_OVER_AFTER = 200;
/** Enough chat segments that the window evicts well past the default retention of 1,000. */
const CHATS = 1_100;
const RETAINED = 1_000;

type Call = { op: 'admit' | 'rehydrate' | 'unpin' | 'advanceTurn'; input: unknown };
const PURE: Record<Call['op'], (s: WindowState, input: unknown) => Transition<unknown>> = {
  admit,
  rehydrate,
  unpin,
  advanceTurn,
};

async function outcome(fn: () => unknown): Promise<{ ok: unknown } | { error: string; details: unknown }> {
  try {
    return { ok: await fn() };
  } catch (err) {
    if (!(err instanceof MemgateError)) throw err;
    return { error: err.type, details: err.details };
  }
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail');
}

interface Run {
  runId: string;
  input: ContextWindowInput;
  history: History;
}

/** The runs of a workflow's chain, from `runId` on, each with the input it started with. */
async function runChain(workflowId: string, runId: string): Promise<Run[]> {
  const history = await env.client.temporal.workflow.getHandle(workflowId, runId).fetchHistory();
  const events = history.events ?? [];
  const started = events[0]!.workflowExecutionStartedEventAttributes!;
  const [payload] = await new ContentCodec(env.store).decode([started.input!.payloads![0]!]);
  const input: ContextWindowInput = defaultPayloadConverter.fromPayload(payload!);
  const next = events.at(-1)!.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
  return [{ runId, input, history }, ...(next ? await runChain(workflowId, next) : [])];
}

describe('a context window session across continue-as-new', () => {
  it('carries bounded state across hand-overs, decides as the pure core throughout, and closes', async () => {
    const session = `history-${randomUUID().slice(0, 8)}`;
    const workflowId = contextWindowWorkflowId(session);
    const first = await env.client.temporal.workflow.start(contextWindow, {
      workflowId,
      taskQueue: env.config.taskQueue,
      args: [{ sessionId: session, settings: SETTINGS, continueAsNewAfterUpdates: HAND_OVER_AFTER }],
    });
    let state = openWindow(SETTINGS);
    /** Sends one Update and checks the workflow decided exactly as the pure core. */
    const call = async ({ op, input }: Call) => {
      const expected = await outcome(() => {
        const next = PURE[op](state, input);
        state = next.state;
        return next.result;
      });
      const actual = await outcome(() =>
        (windows[op] as (s: string, i: unknown) => Promise<unknown>)(session, input),
      );
      expect(actual).toEqual(expected);
      return actual;
    };

    // A pinned constraint; the rate-limits table, forced out by a pinned tool output.
    await call({
      op: 'admit',
      input: { segmentId: 'constraint', tokens: 100, salience: 0.9, pin: { kind: 'explicit' } },
    });
    await call({ op: 'admit', input: { segmentId: 'table', tokens: 400, salience: 0.3 } });
    await call({
      op: 'admit',
      input: { segmentId: 'tool', tokens: 600, salience: 0.9, pin: { kind: 'toolLoop', loopId: 'fetch' } },
    });
    // Then a long conversation churning through the 300 tokens left.
    for (let i = 0; i < CHATS; i++) {
      await call({
        op: 'admit',
        input: { segmentId: `chat-${i}`, tokens: 150, salience: 0.5 + (i % 5) / 10 },
      });
      if (i % 10 === 9) await call({ op: 'advanceTurn', input: {} });
    }
    const evictions = 1 + CHATS - 2;

    // The window holds what still decides: the table (its displacer's pin holds) and the most
    // recent chats; the rest is counted, not hidden. Before the bound it held every record.
    const view = await windows.show(session);
    expect(view.evictions.length).toBeLessThanOrEqual(RETAINED + 1);
    expect(view.evictions.length + view.evictionsDropped).toBe(evictions);
    expect(view).toEqual(viewWindow(state));
    expect(view.evictions[0]).toMatchObject({
      segmentId: 'table',
      displacedBy: 'tool',
      displacerPinned: true,
    });

    // The run chain handed over, each run starting from bounded state.
    const chain = await runChain(workflowId, first.firstExecutionRunId);
    expect(chain.length).toBeGreaterThanOrEqual(6);
    expect(
      (await env.client.temporal.workflow.getHandle(workflowId, first.firstExecutionRunId).describe()).status
        .name,
    ).toBe('CONTINUED_AS_NEW');
    for (const { input } of chain.slice(1)) {
      expect(input.continueAsNewAfterUpdates).toBe(HAND_OVER_AFTER);
      expect(input.state!.evictions.length).toBeLessThanOrEqual(RETAINED + 1);
      expect(input.state!.evictions.map((e) => e.segmentId)).toContain('table');
    }
    const carried = chain.at(-1)!.input.state!;
    expect(carried.evictionsDropped).toBeGreaterThan(0);
    expect(JSON.stringify(carried).length).toBeLessThan(512 * 1024);

    // After the hand-overs: the table is still kept out by the running tool loop, and the
    // pinned constraint cannot be displaced, neither by it nor by a new segment.
    expect(await call({ op: 'rehydrate', input: { segmentId: 'table', salience: 1 } })).toMatchObject({
      error: 'RehydrationBlocked',
      details: { reasons: ['evictedByLivePin', 'wouldDisplacePinned'] },
    });
    expect(await call({ op: 'admit', input: { segmentId: 'huge', tokens: 800, salience: 1 } })).toMatchObject(
      {
        error: 'RehydrationBlocked',
        details: { reasons: ['noUnpinnedRoom'] },
      },
    );
    // Once the loop ends, the table comes back, and the constraint stays.
    await call({ op: 'unpin', input: { loopId: 'fetch' } });
    expect(await call({ op: 'rehydrate', input: { segmentId: 'table', salience: 1 } })).toMatchObject({
      ok: { mode: 'swap', segment: { id: 'table' } },
    });
    expect((await windows.show(session)).segments.map((s) => s.id)).toContain('constraint');

    // The close ends the workflow with the session's summary; later calls are a Conflict.
    const summary = await windows.close(session);
    expect(summary).toEqual(summariseWindow(state));
    expect(summary.evictions).toBeGreaterThan(evictions);
    const handle = env.client.temporal.workflow.getHandle(workflowId);
    expect(await handle.result()).toEqual(summary);
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    for (const later of [
      () => windows.admit(session, { segmentId: 'late', tokens: 10, salience: 0.5 }),
      () => windows.advanceTurn(session),
      () => windows.close(session),
    ]) {
      const err = await caught(later());
      expect(err).toBeInstanceOf(ConflictError);
      expect((err as ConflictError).details).toMatchObject({ sessionId: session, closed: true });
    }
    expect(await windows.show(session)).toEqual(viewWindow(state));
    // Opening it again starts an empty window.
    const reopened = await windows.open(session);
    expect(reopened).toMatchObject({ turn: 0, segments: [], evictions: [], evictionsDropped: 0 });

    // Every run replays deterministically: the hand-overs and the close.
    const runs = await runChain(workflowId, first.firstExecutionRunId);
    const replays = [];
    for await (const r of Worker.runReplayHistories(
      {
        workflowBundle: { codePath: inject('workflowBundlePath') },
        // Histories hold what memgate's codec encrypted: the replay decodes as a worker does.
        dataConverter: { payloadCodecs: [new ContentCodec(env.store)] },
      },
      runs.map((run) => ({ workflowId, history: run.history })),
    )) {
      replays.push(r.error);
    }
    expect(replays).toEqual(runs.map(() => undefined));
  }, 600_000);

  it('rejects a threshold that is not a positive whole number', async () => {
    const handle = await env.client.temporal.workflow.start(contextWindow, {
      workflowId: contextWindowWorkflowId(`threshold-${randomUUID().slice(0, 8)}`),
      taskQueue: env.config.taskQueue,
      args: [{ sessionId: 'threshold', settings: SETTINGS, continueAsNewAfterUpdates: 0 }],
    });
    const err = await caught(handle.result());
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause).toMatchObject({ type: 'InvalidInput' });
  });

  it('memgate window close prints the summary, and a second close is a Conflict', async () => {
    const session = `cli-close-${randomUUID().slice(0, 8)}`;
    await windows.open(session, { capacity: 500 });
    await windows.admit(session, { segmentId: 'a', tokens: 300, salience: 0.5 });
    await windows.admit(session, { segmentId: 'b', tokens: 300, salience: 0.6 });
    const closed = await runMemgate(env, ['window', 'close', session]);
    expect(closed.stderr).toBe('');
    expect(closed.code).toBe(0);
    expect(JSON.parse(closed.stdout)).toEqual({ turn: 0, segments: 1, used: 300, evictions: 1 });
    const again = await runMemgate(env, ['window', 'close', session]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`error [Conflict]: session ${session} is closed`);
  });
});
