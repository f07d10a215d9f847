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
import {
  ConflictError,
  MemgateError,
  EvictionBoundaryError,
  InvalidConfigError,
  InvalidInputError,
  ModelError,
  NotFoundError,
  ForbiddenError,
  QuotaExceededError,
  RateLimitedError,
  StackUnavailableError,
  UnauthenticatedError,
  type Issue,
  type MemgateErrorType,
} from '../core/errors';
import { RehydrationBlocked, type Refusal } from '../core/window/blocked';

/**
 * How each MemgateError `type` is rebuilt from the ApplicationFailure it travelled as: a record
 * over the closed list, so a type added to it does not compile until it comes back as itself
 * (an unknown one would reach the caller as StackUnavailable, which says to retry).
 */
const REBUILT: Readonly<
  Record<MemgateErrorType, (failure: ApplicationFailure, details: Record<string, unknown>) => MemgateError>
> = {
  InvalidInput: (f, d) => new InvalidInputError(stripIssues(f.message), (d.issues as Issue[]) ?? []),
  // A worker's configuration refused: no retry mends it.
  InvalidConfig: (_, d) => new InvalidConfigError(String(d.variable), String(d.allowed), d.received),
  EvictionBoundaryError: (f, d) => new EvictionBoundaryError(f.message, d),
  RehydrationBlocked: (_, d) => new RehydrationBlocked(d as unknown as Refusal),
  NotFound: (f, d) => new NotFoundError(f.message, d),
  Conflict: (f, d) => new ConflictError(f.message, d),
  ModelError: (f, d) => new ModelError(f.message, !f.nonRetryable, d),
  StackUnavailable: (f, d) => new StackUnavailableError(f.message, d),
  Unauthenticated: (f, d) => new UnauthenticatedError(f.message, d),
  Forbidden: (f, d) => new ForbiddenError(f.message, d),
  RateLimited: (f, d) => new RateLimitedError(f.message, d),
  QuotaExceeded: (f, d) => new QuotaExceededError(f.message, d),
};

/**
 * Turn a failed Temporal call back into the MemgateError class it started as, by the
 * ApplicationFailure `type` the workflow set. Anything else is rethrown unchanged.
 */
export function fromTemporalFailure(err: unknown): unknown {
  const failure = err instanceof WorkflowUpdateFailedError ? err.cause : err;
  if (!(failure instanceof ApplicationFailure) || !failure.type || !Object.hasOwn(REBUILT, failure.type)) {
    return err;
  }
  const details = (failure.details?.[0] ?? {}) as Record<string, unknown>;
  return REBUILT[failure.type as MemgateErrorType](failure, details);
}

/** InvalidInputError re-appends its issues to the message; keep only the lead. */
function stripIssues(message: string): string {
  return message.split(': ')[0] ?? message;
}

/**
 * What every Temporal call of the client throws: a MemgateError, never a raw gRPC error. A typed
 * failure that travelled through Temporal comes back as its class; a Temporal that failed or
 * cannot be reached is StackUnavailable; a workflow that is not there is NotFound.
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
