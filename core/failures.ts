import { ApplicationFailure } from '@temporalio/common';
import { MemgateError } from './errors';

/**
 * A MemgateError leaves a workflow, an Update validator or an activity as an ApplicationFailure of the
 * same `type`, non-retryable unless the error says otherwise, so the client can rebuild the
 * class (client/errors.ts). Anything else passes through untouched.
 */
export function asApplicationFailure(err: unknown): unknown {
  if (!(err instanceof MemgateError)) return err;
  return ApplicationFailure.create({
    type: err.type,
    message: err.message,
    details: [err.details],
    nonRetryable: !err.retryable,
  });
}
