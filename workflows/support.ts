import type { RetryPolicy } from '@temporalio/common';
import {
  defineSignal,
  makeContinueAsNewFunc,
  setHandler,
  workflowInfo,
  type Workflow,
} from '@temporalio/workflow';
import type { z } from 'zod';
import { assertNotAhead } from '../core/clock';
import { asApplicationFailure } from '../core/failures';
import { parseInput } from '../core/messages';

/**
 * A workflow's own input, validated before anything runs: a caller of the Temporal API need
 * not have gone through the client. A bad one fails the workflow with a non-retryable
 * InvalidInput.
 */
export function validated<S extends z.ZodType>(schema: S, input: unknown, what: string): z.output<S> {
  try {
    return parseInput(schema, input, what);
  } catch (err) {
    throw asApplicationFailure(err);
  }
}

/** A run may not decide as if a time to come had already come. */
export function notAhead(asOf: number, what: string): void {
  try {
    assertNotAhead(asOf, Date.now(), 'asOf', what);
  } catch (err) {
    throw asApplicationFailure(err);
  }
}

/** Retried with backoff; a bad input, configuration or policy is never retried. */
export const RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 10,
  nonRetryableErrorTypes: ['InvalidInput', 'InvalidConfig', 'EvictionBoundaryError'],
};

/**
 * Whether a forever-running run should hand over now: its history grows long, or (under
 * Worker Versioning) a newer version of the workers became current while the run stays
 * pinned to its own (docs/versioning.md).
 */
export function handOverSuggested(): boolean {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.targetWorkerDeploymentVersionChanged;
}

/**
 * Wakes a forever-running run, which then looks at `handOverSuggested`: an idle one stays
 * pinned to its version until its next task, and this gives it one (`memgate hand-over`,
 * docs/versioning.md). Its handler does nothing; the task is the point. A run of a version
 * without the handler wakes all the same, and leaves the signal unhandled.
 */
export const handOverSignal = defineSignal('handOver');

/** Registered by each forever-running workflow. */
export function wakeOnHandOverSignal(): void {
  setHandler(handOverSignal, () => undefined);
}

/**
 * Continue-as-new onto the current version of the workers: the next run's first task goes
 * to it, and the run stays pinned there. Unversioned workers ignore the option.
 */
export function handOverToCurrentVersion<F extends Workflow>(): (...args: Parameters<F>) => Promise<never> {
  return makeContinueAsNewFunc<F>({ initialVersioningBehavior: 'AUTO_UPGRADE' });
}
