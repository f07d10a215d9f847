import type { RetryPolicy } from '@temporalio/common';
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
