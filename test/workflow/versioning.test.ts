import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ForgetActivities } from '../../activities';
import { parseConfig } from '../../core/config';
import { policyOf } from '../../core/policy';
import { handOverRunning } from '../../client/admin';
import { workerDeploymentOf } from '../../worker/worker';
import {
  contextWindow,
  contextWindowWorkflowId,
  admitUpdate,
  windowQuery,
} from '../../workflows/contextWindow';
import { forget, forgetWorkflowId } from '../../workflows/forget';
import { startWorkflowEnv } from '../support/stubbedWorker';
import { buildIdOf, setCurrentVersion } from '../support/versions';

/**
 * Worker Versioning on the real dev server (docs/versioning.md): two versions of the workers
 * live side by side across an incompatible change (the second reorders forget's steps, as in
 * test/fixtures/workflow-changes/stepsReordered.ts). A forget begun on the first version
 * finishes there, pinned, while a new one starts on the second; a context window, which runs
 * for as long as its session, moves to the second at its next hand-over.
 */
const REORDERED = resolve(__dirname, '..', 'fixtures', 'workflow-changes', 'stepsReordered.ts');
const POLICY = policyOf(parseConfig({}));
const SETTINGS = { capacity: 1_000, decay: 0.85, rehydrationThreshold: 0.5, margin: 0.1 };

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

/** Forget's activities, recording the order in which a version's worker ran them. */
function forgetStubs(calls: string[], gate: Promise<void> = Promise.resolve()): ForgetActivities {
  return {
    async forgetTombstone() {
      calls.push('forgetTombstone');
      await gate;
    },
    async currentPolicy() {
      calls.push('currentPolicy');
      return POLICY;
    },
    async forgetEntry() {
      calls.push('forgetEntry');
      return { removed: [], restored: [], tiers: ['hot'], queriesRemoved: 0 };
    },
    async forgetDerived() {
      calls.push('forgetDerived');
      return { resummarised: [], removed: [], queriesRemoved: 0 };
    },
  } as unknown as ForgetActivities;
}

async function until(what: string, holds: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200 && !(await holds()); i++) await new Promise((done) => setTimeout(done, 100));
  expect(await holds(), what).toBe(true);
}

describe('two worker versions across an incompatible change', () => {
  it('keeps an old run on its version, starts new runs on the current one, and hands windows over', async () => {
    const taskQueue = `versioned-${randomUUID().slice(0, 8)}`;
    const deployment = (buildId: string) =>
      workerDeploymentOf(parseConfig({ MEMGATE_TASK_QUEUE: taskQueue }), buildId);
    let release!: () => void;
    const gate = new Promise<void>((done) => (release = done));
    const v1Calls: string[] = [];
    const v2Calls: string[] = [];
    const v1 = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: { codePath: inject('workflowsBundlePath') },
      activities: forgetStubs(v1Calls, gate),
      workerDeploymentOptions: deployment('v1'),
    });
    const v2 = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowsPath: REORDERED,
      activities: forgetStubs(v2Calls),
      workerDeploymentOptions: deployment('v2'),
    });
    expect(deployment('v1')).toMatchObject({
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'PINNED',
    });

    await v1.runUntil(async () => {
      await setCurrentVersion(env, taskQueue, 'v1');
      const old = await env.client.workflow.start(forget, {
        taskQueue,
        workflowId: forgetWorkflowId('agent', 'old'),
        args: [{ agentId: 'agent', entryId: 'old' }],
      });
      const sessionId = `session-${taskQueue}`;
      const windowId = contextWindowWorkflowId(sessionId);
      const window = await env.client.workflow.start(contextWindow, {
        taskQueue,
        workflowId: windowId,
        args: [{ sessionId, settings: SETTINGS }],
      });
      await window.executeUpdate(admitUpdate, {
        args: [{ segmentId: 'before', tokens: 100, salience: 0.5 }],
      });
      // A window nobody updates after the deploy: only `memgate hand-over` moves it.
      const idleId = contextWindowWorkflowId(`idle-${taskQueue}`);
      const idle = await env.client.workflow.start(contextWindow, {
        taskQueue,
        workflowId: idleId,
        args: [{ sessionId: `idle-${taskQueue}`, settings: SETTINGS }],
      });
      await idle.executeUpdate(admitUpdate, { args: [{ segmentId: 'kept', tokens: 100, salience: 0.5 }] });
      await until('the old forget is under way', async () => v1Calls.includes('forgetTombstone'));
      expect(await buildIdOf(env, old.workflowId)).toBe('v1');
      expect(await buildIdOf(env, windowId)).toBe('v1');

      await v2.runUntil(async () => {
        await setCurrentVersion(env, taskQueue, 'v2');
        // A new run starts on the new code: its steps in the new order.
        const fresh = await env.client.workflow.execute(forget, {
          taskQueue,
          workflowId: forgetWorkflowId('agent', 'new'),
          args: [{ agentId: 'agent', entryId: 'new' }],
        });
        expect(fresh).toMatchObject({ entryId: 'new' });
        expect(v2Calls).toEqual(['currentPolicy', 'forgetTombstone', 'forgetEntry', 'forgetDerived']);
        expect(await buildIdOf(env, forgetWorkflowId('agent', 'new'))).toBe('v2');

        // The old run finishes on the code it began on, with no nondeterminism.
        release();
        await expect(old.result()).resolves.toMatchObject({ entryId: 'old' });
        expect(v1Calls.filter((c) => c !== 'forgetTombstone')).toEqual([
          'currentPolicy',
          'forgetEntry',
          'forgetDerived',
        ]);
        expect(await buildIdOf(env, old.workflowId, old.firstExecutionRunId)).toBe('v1');

        // The window's next task sees the new current version and hands over onto it,
        // carrying its segments.
        await window.executeUpdate(admitUpdate, {
          args: [{ segmentId: 'after', tokens: 100, salience: 0.5 }],
        });
        await until('the window runs on v2', async () => (await buildIdOf(env, windowId)) === 'v2');
        const next = await env.client.workflow.getHandle(windowId).describe();
        expect(next.runId).not.toBe(window.firstExecutionRunId);
        const view = await env.client.workflow.getHandle(windowId).query(windowQuery);
        expect(view.segments.map((s) => s.id).sort()).toEqual(['after', 'before']);

        // The idle window is still pinned to v1 until it is woken.
        expect(await buildIdOf(env, idleId)).toBe('v1');
        // Woken again while the listing lags behind its start: a woken run with nothing to do sleeps again.
        await until('the idle window runs on v2', async () => {
          await handOverRunning(env.client, taskQueue);
          return (await buildIdOf(env, idleId)) === 'v2';
        });
        expect((await env.client.workflow.getHandle(idleId).describe()).runId).not.toBe(
          idle.firstExecutionRunId,
        );
        const kept = await env.client.workflow.getHandle(idleId).query(windowQuery);
        expect(kept.segments.map((s) => s.id)).toEqual(['kept']);
      });
    });
  });
});
