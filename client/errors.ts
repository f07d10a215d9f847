import { ApplicationFailure, WorkflowUpdateFailedError } from '@temporalio/client';
import {
  ConflictError,
  EvictionBoundaryError,
  InvalidInputError,
  ModelError,
  NotFoundError,
  StackUnavailableError,
  type Issue,
} from '../core/errors';
import { RehydrationBlocked, type Refusal } from '../core/window/blocked';

/**
 * Turn a failed Temporal call back into the MemgateError class it started as, by the
 * ApplicationFailure `type` the workflow set. Anything else is rethrown unchanged.
 */
export function fromTemporalFailure(err: unknown): unknown {
  const failure = err instanceof WorkflowUpdateFailedError ? err.cause : err;
  if (!(failure instanceof ApplicationFailure)) return err;
  const details = (failure.details?.[0] ?? {}) as Record<string, unknown>;
  switch (failure.type) {
    case 'InvalidInput':
      return new InvalidInputError(stripIssues(failure.message), (details.issues as Issue[]) ?? []);
    case 'EvictionBoundaryError':
      return new EvictionBoundaryError(failure.message, details);
    case 'RehydrationBlocked':
      return new RehydrationBlocked(details as unknown as Refusal);
    case 'NotFound':
      return new NotFoundError(failure.message, details);
    case 'Conflict':
      return new ConflictError(failure.message, details);
    case 'ModelError':
      return new ModelError(failure.message, !failure.nonRetryable, details);
    case 'StackUnavailable':
      return new StackUnavailableError(failure.message, details);
    default:
      return err;
  }
}

/** InvalidInputError re-appends its issues to the message; keep only the lead. */
function stripIssues(message: string): string {
  return message.split(': ')[0] ?? message;
}
