import { ApplicationFailure } from '@temporalio/workflow';
import { MemgateError } from '../core/errors';

/**
 * A MemgateError leaves a workflow (or an Update validator) as an ApplicationFailure of the
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
