import { ApplicationFailure, ServiceError, WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { resendReason } from '../../client/resend';
import { RUN_ENDING } from '../../workflows/agentMemory';

/** A gRPC failure as @grpc/grpc-js raises it, wrapped as the Temporal client wraps it. */
function rpcFailure(code: number, details: string): ServiceError {
  const grpc = Object.assign(new Error(`${code} ${details}`), { code, details, metadata: {} });
  return new ServiceError('Workflow Update failed', { cause: grpc });
}

describe('resendReason', () => {
  it('sends again an Update the server aborted when the workflow task carrying it failed', () => {
    // What CI saw under sustained writes: the write failed though a resend would have landed.
    const aborted = rpcFailure(
      9,
      'FAILED_PRECONDITION: Unable to perform workflow execution update due to unexpected workflow task failure.',
    );
    expect(resendReason(aborted)).toBe('aborted-by-server');
  });

  it('sends again an Update the server rejected because no worker processed it', () => {
    // What a fresh clone's CI saw in the store stress test: three writes failed though the
    // server's own failure says none was accepted, so no handler of theirs ran.
    const unprocessed = new WorkflowUpdateFailedError(
      'Workflow Update failed',
      ApplicationFailure.create({
        type: 'UnprocessedUpdate',
        message:
          "Workflow Update is rejected because it wasn't processed by worker. Probably, Workflow Update is not supported by the worker.",
        nonRetryable: true,
      }),
    );
    expect(resendReason(unprocessed)).toBe('not-processed');
  });

  it('sends again a write the run turned away while handing over', () => {
    const ending = new WorkflowUpdateFailedError(
      'Workflow Update failed',
      ApplicationFailure.create({ type: RUN_ENDING, message: 'continuing as new' }),
    );
    expect(resendReason(ending)).toBe('handing-over');
  });

  it('leaves every other failure to the caller', () => {
    const refused = new WorkflowUpdateFailedError(
      'Workflow Update failed',
      ApplicationFailure.create({ type: 'InvalidInput', message: 'text is empty', nonRetryable: true }),
    );
    expect(resendReason(refused)).toBeUndefined();
    expect(resendReason(rpcFailure(4, 'DEADLINE_EXCEEDED: deadline exceeded'))).toBeUndefined();
    expect(resendReason(rpcFailure(14, 'UNAVAILABLE: connection refused'))).toBeUndefined();
    expect(resendReason(new Error('a bug'))).toBeUndefined();
  });
});
