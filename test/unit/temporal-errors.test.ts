import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { toMemgateError } from '../../client/errors';
import {
  ConflictError,
  EvictionBoundaryError,
  ForbiddenError,
  InvalidConfigError,
  InvalidInputError,
  ModelError,
  NotFoundError,
  QuotaExceededError,
  RateLimitedError,
  StackUnavailableError,
  UnauthenticatedError,
  type MemgateError,
  type MemgateErrorType,
} from '../../core/errors';
import { asApplicationFailure } from '../../core/failures';
import { RehydrationBlocked } from '../../core/window';

/** One error of every type of the closed list (core/errors.ts). */
const EVERY: Record<MemgateErrorType, MemgateError> = {
  InvalidInput: new InvalidInputError('invalid write', [{ path: 'entries.0.text', message: 'too long' }]),
  InvalidConfig: new InvalidConfigError('MEMGATE_HOT_CAPACITY', 'a positive integer', 'many'),
  EvictionBoundaryError: new EvictionBoundaryError('floor at or above the gate'),
  RehydrationBlocked: new RehydrationBlocked({
    operation: 'rehydrate',
    turn: 3,
    reasons: ['wouldDisplacePinned'],
    incoming: { id: 'b', tokens: 10, salience: 0.9 },
    wouldDisplace: [{ id: 'a', tokens: 10, salience: 0.5, pinned: true }],
    pins: [{ segmentId: 'a', pin: { kind: 'explicit' } }],
  }),
  NotFound: new NotFoundError('no entry e1'),
  Conflict: new ConflictError('not superseded'),
  ModelError: new ModelError('the model request timed out', true),
  StackUnavailable: new StackUnavailableError('the store did not answer'),
  Unauthenticated: new UnauthenticatedError('no key'),
  Forbidden: new ForbiddenError('not this agent'),
  RateLimited: new RateLimitedError('over the key’s share', { retryAfterMs: 1_000 }),
  QuotaExceeded: new QuotaExceededError('key holds its quota of 2 agents', {
    keyId: 'k',
    kind: 'agent',
    max: 2,
  }),
};

/** As a failed workflow whose activity threw `err` reaches its client. */
function throughAnActivity(err: MemgateError): WorkflowFailedError {
  const activity = new ActivityFailure(
    'activity failed',
    'someActivity',
    '1',
    RetryState.NON_RETRYABLE_FAILURE,
    'worker',
    asApplicationFailure(err) as ApplicationFailure,
  );
  return new WorkflowFailedError('workflow failed', activity, RetryState.NON_RETRYABLE_FAILURE);
}

describe('a MemgateError through Temporal', () => {
  it.each(Object.entries(EVERY))('%s thrown in an activity reaches the client as itself', (type, err) => {
    const back = toMemgateError(throughAnActivity(err)) as MemgateError;
    expect(back.constructor).toBe(err.constructor);
    expect(back.type).toBe(type);
    expect(back.retryable).toBe(err.retryable);
  });
});
