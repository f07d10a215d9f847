import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Runtime, DefaultLogger, Worker } from '@temporalio/worker';
import { expect, inject } from 'vitest';

let runtimeInstalled = false;

/**
 * A dev server of the cached Temporal CLI, started for one test file. The SDK's own log lines
 * are quiet: a test asserts what a workflow did, not what the worker printed about it.
 */
export async function startWorkflowEnv(): Promise<TestWorkflowEnvironment> {
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('WARN') });
    runtimeInstalled = true;
  }
  return TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: inject('temporalCliPath') } },
  });
}

/**
 * A worker on a task queue of its own, running every workflow of `workflows/` (or the file
 * `workflowsPath` names, such as the audit's) against the given activity stubs; `run` runs
 * `fn` while it polls, as the samples' tests do.
 */
export async function stubbedWorker(
  env: TestWorkflowEnvironment,
  activities: object,
  opts: { workflowsPath?: string } = {},
) {
  const taskQueue = `stubbed-${randomUUID().slice(0, 8)}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    ...(opts.workflowsPath
      ? { workflowsPath: opts.workflowsPath }
      : { workflowBundle: { codePath: inject('workflowsBundlePath') } }),
    activities,
  });
  return {
    taskQueue,
    worker,
    run: <R>(fn: () => Promise<R>) => worker.runUntil(fn),
  };
}

/** The typed failure under a failed workflow, through the activity failure if there is one. */
export function typedFailure(err: unknown): ApplicationFailure {
  expect(err).toBeInstanceOf(WorkflowFailedError);
  let cause = (err as WorkflowFailedError).cause;
  if (cause instanceof ActivityFailure) cause = cause.cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

/** The typed failure an Update failed with, as its caller receives it. */
export async function updateFailure(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
  const cause = (err as WorkflowUpdateFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}
