import {
  ActivityFailure,
  ApplicationFailure,
  ChildWorkflowFailure,
  isGrpcServiceError,
  ServiceError,
  TemporalFailure,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { storeFailure } from '../store/db';
import {
  ConflictError,
  MemgateError,
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

/**
 * What every client call throws: a MemgateError, never a raw driver or gRPC error. A typed
 * failure that travelled through Temporal comes back as its class; a store or Temporal that
 * failed or cannot be reached is StackUnavailable; a workflow that is not there is NotFound.
 * Anything else (a bug in memgate itself) is rethrown as it is, not disguised.
 */
export function toMemgateError(err: unknown): unknown {
  if (err instanceof MemgateError) return err;
  // The failure a workflow or one of its activities raised, as the class it started as.
  let cause = err;
  while (
    (cause instanceof WorkflowFailedError ||
      cause instanceof WorkflowUpdateFailedError ||
      cause instanceof ActivityFailure ||
      cause instanceof ChildWorkflowFailure) &&
    cause.cause
  ) {
    cause = cause.cause;
  }
  const typed = fromTemporalFailure(cause);
  if (typed !== cause) return typed;
  const store = storeFailure(err);
  if (store) return store;
  if (err instanceof WorkflowNotFoundError) return new NotFoundError(err.message);
  if (
    err instanceof ServiceError ||
    isGrpcServiceError(err) ||
    err instanceof TemporalFailure ||
    err instanceof WorkflowFailedError ||
    err instanceof WorkflowUpdateFailedError
  ) {
    const cause = (err as Error).cause instanceof Error ? `: ${((err as Error).cause as Error).message}` : '';
    return new StackUnavailableError(`Temporal failed: ${(err as Error).message}${cause}`, {
      temporalError: (err as Error).name,
    });
  }
  return err;
}
