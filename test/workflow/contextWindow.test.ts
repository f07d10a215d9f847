import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter, WorkflowNotFoundError } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Refusal, WindowSettingsInput } from '../../core/window';
import {
  admitUpdate,
  advanceTurnUpdate,
  closeUpdate,
  contextWindow,
  pinUpdate,
  rehydrateUpdate,
  unpinUpdate,
  windowQuery,
  type ContextWindowInput,
} from '../../workflows/contextWindow';
import { startWorkflowEnv, stubbedWorker, updateFailure } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

const settings: WindowSettingsInput = { capacity: 100, decay: 0.9, rehydrationThreshold: 0.5, margin: 0.1 };

let seq = 0;
function openWindow(taskQueue: string, input: Partial<ContextWindowInput> = {}) {
  const sessionId = `s-${Date.now()}-${seq++}`;
  return env.client.workflow.start(contextWindow, {
    taskQueue,
    workflowId: `window-${sessionId}`,
    args: [{ sessionId, settings, ...input }],
  });
}

/**
 * A: pinned, 60 tokens; B: 40 tokens, then pushed out by C on admission. The window is full
 * with A and C.
 */
async function fillWithAPinnedAndBEvicted(h: WorkflowHandle<typeof contextWindow>) {
  const a = await h.executeUpdate(admitUpdate, {
    args: [{ segmentId: 'A', tokens: 60, salience: 0.2, pin: { kind: 'explicit' } }],
  });
  expect(a).toMatchObject({ mode: 'slack', used: 60, evicted: [] });
  await h.executeUpdate(admitUpdate, { args: [{ segmentId: 'B', tokens: 40, salience: 0.3 }] });
  const c = await h.executeUpdate(admitUpdate, { args: [{ segmentId: 'C', tokens: 40, salience: 0.5 }] });
  expect(c.mode).toBe('evict');
  expect(c.evicted.map((e) => e.segmentId)).toEqual(['B']);
  expect(c.used).toBe(100);
}

describe('contextWindow', () => {
  it('admits, pins, and refuses a rehydration that would displace a pinned segment', async () => {
    const w = await stubbedWorker(env, {});
    await w.run(async () => {
      const h = await openWindow(w.taskQueue);
      await fillWithAPinnedAndBEvicted(h);
      const pinned = await h.executeUpdate(pinUpdate, {
        args: [{ segmentId: 'C', pin: { kind: 'explicit' } }],
      });
      expect(pinned).toMatchObject({ id: 'C', pins: [{ kind: 'explicit' }] });

      const refused = await updateFailure(
        h.executeUpdate(rehydrateUpdate, { args: [{ segmentId: 'B', salience: 0.9 }] }),
      );
      expect(refused.type).toBe('RehydrationBlocked');
      expect(refused.nonRetryable).toBe(true);
      const refusal = refused.details?.[0] as Refusal;
      expect(refusal.reasons).toEqual(['wouldDisplacePinned']);
      expect(refusal.wouldDisplace.every((s) => s.pinned)).toBe(true);
      // Nothing changed.
      const view = await h.query(windowQuery);
      expect(view.segments.map((s) => s.id)).toEqual(['A', 'C']);
      expect(view.used).toBe(100);
      expect(view.evictions.map((e) => e.segmentId)).toEqual(['B']);

      // Only the pin stood in the way: once C is unpinned, B swaps in for it.
      await h.executeUpdate(unpinUpdate, { args: [{ segmentId: 'C' }] });
      const back = await h.executeUpdate(rehydrateUpdate, { args: [{ segmentId: 'B', salience: 0.9 }] });
      expect(back.mode).toBe('swap');
      expect(back.evicted.map((e) => e.segmentId)).toEqual(['C']);
      await h.terminate();
    });
  });

  it('rejects bad Updates in the validator, typed, with nothing in history', async () => {
    const w = await stubbedWorker(env, {});
    await w.run(async () => {
      const h = await openWindow(w.taskQueue);
      const negative = await updateFailure(
        h.executeUpdate(admitUpdate, { args: [{ segmentId: 'A', tokens: -1, salience: 0.5 }] }),
      );
      expect(negative.type).toBe('InvalidInput');
      const tooBig = await updateFailure(
        h.executeUpdate(admitUpdate, { args: [{ segmentId: 'A', tokens: 101, salience: 0.5 }] }),
      );
      expect(tooBig.type).toBe('InvalidInput');
      expect(tooBig.message).toContain('capacity');
      const unknown = await updateFailure(
        h.executeUpdate(pinUpdate, { args: [{ segmentId: 'nowhere', pin: { kind: 'explicit' } }] }),
      );
      expect(unknown.type).toBe('NotFound');
      const view = await h.query(windowQuery);
      expect(view).toMatchObject({ turn: 0, used: 0, segments: [] });
      const events = (await h.fetchHistory()).events ?? [];
      expect(events.some((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toBe(false);
      await h.terminate();
    });
  });

  it('fails typed on a bad workflow input', async () => {
    const w = await stubbedWorker(env, {});
    await w.run(async () => {
      const raw = (input: unknown) =>
        env.client.workflow.start(contextWindow, {
          taskQueue: w.taskQueue,
          workflowId: `window-raw-${Date.now()}-${seq++}`,
          args: [input as ContextWindowInput],
        });
      const started = [
        await openWindow(w.taskQueue, { settings: { ...settings, capacity: 0 } }),
        await openWindow(w.taskQueue, { continueAsNewAfterUpdates: 0 }),
        // As a caller of the Temporal API may send it: no input, or a state of nothing.
        await raw(null),
        await openWindow(w.taskQueue, { state: {} as ContextWindowInput['state'] }),
      ];
      for (const h of started) {
        const err = await h.result().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        const cause = (err as WorkflowFailedError).cause;
        expect(cause).toBeInstanceOf(ApplicationFailure);
        expect((cause as ApplicationFailure).type).toBe('InvalidInput');
      }
    });
  });

  it('carries its state across continue-as-new, and the next run goes on from it', async () => {
    const w = await stubbedWorker(env, {});
    await w.run(async () => {
      const h = await openWindow(w.taskQueue, { continueAsNewAfterUpdates: 4 });
      await fillWithAPinnedAndBEvicted(h);
      await h.executeUpdate(advanceTurnUpdate, { args: [{ scores: { C: 0.8 } }] });
      const firstRun = h.firstExecutionRunId;
      await vi.waitFor(async () => expect((await h.describe()).runId).not.toBe(firstRun), {
        timeout: 10_000,
        interval: 100,
      });
      const events =
        (await env.client.workflow.getHandle(h.workflowId, firstRun).fetchHistory()).events ?? [];
      const attrs = events.find(
        (e) => e.workflowExecutionContinuedAsNewEventAttributes,
      )?.workflowExecutionContinuedAsNewEventAttributes;
      const handedOver: ContextWindowInput = defaultPayloadConverter.fromPayload(attrs!.input!.payloads![0]!);
      expect(handedOver.continueAsNewAfterUpdates).toBe(4);
      expect(handedOver.state?.turn).toBe(1);
      expect(handedOver.state?.segments.map((s) => s.id)).toEqual(['A', 'C']);

      const view = await h.query(windowQuery);
      expect(view.turn).toBe(1);
      expect(view.used).toBe(100);
      expect(view.segments.map((s) => [s.id, s.salience, s.pins])).toEqual([
        ['A', 0.2 * 0.9, [{ kind: 'explicit' }]],
        ['C', 0.8, []],
      ]);
      expect(view.evictions.map((e) => e.segmentId)).toEqual(['B']);
      // The next run still knows B was evicted, and C as resident.
      const again = await updateFailure(
        h.executeUpdate(admitUpdate, { args: [{ segmentId: 'B', tokens: 40, salience: 0.5 }] }),
      );
      expect(again.type).toBe('Conflict');
      const turn = await h.executeUpdate(advanceTurnUpdate, { args: [{}] });
      expect(turn.turn).toBe(2);
      await h.terminate();
    });
  });

  it('returns its summary on close, and takes no Update after it', async () => {
    const w = await stubbedWorker(env, {});
    await w.run(async () => {
      const h = await openWindow(w.taskQueue);
      await fillWithAPinnedAndBEvicted(h);
      await h.executeUpdate(advanceTurnUpdate, { args: [{}] });
      const summary = await h.executeUpdate(closeUpdate);
      expect(summary).toEqual({ turn: 1, segments: 2, used: 100, evictions: 1 });
      await expect(h.result()).resolves.toEqual(summary);
      const late = await h
        .executeUpdate(admitUpdate, { args: [{ segmentId: 'D', tokens: 1, salience: 0.5 }] })
        .catch((e: unknown) => e);
      // The run is over, so the server refuses it (the client turns that into a Conflict).
      expect(late).toBeInstanceOf(WorkflowNotFoundError);
      const events = (await h.fetchHistory()).events ?? [];
      // Four admissions and turns, and the close: the refused admission is not among them.
      expect(events.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toHaveLength(5);
    });
  });
});
