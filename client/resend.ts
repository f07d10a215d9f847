import { ApplicationFailure, isGrpcServiceError, WorkflowUpdateFailedError } from '@temporalio/client';
import { RUN_ENDING } from '../workflows/agentMemory';

/** gRPC's status code for the server's WorkflowNotReady. */
const FAILED_PRECONDITION = 9;

/**
 * Why an Update that failed may be sent again unchanged:
 * - `handing-over`: the agent's run turned it away while it continues as new; the next run
 *   takes it.
 * - `aborted-by-server`: the server failed the workflow task that carried the Update before
 *   it was accepted (WorkflowNotReady, "unexpected workflow task failure"; the server's own
 *   failure says retries resolve it). Nothing of it reached history, so no handler effect
 *   stands but a write's local persist, which the same ids make idempotent.
 * - `not-processed`: the server rejected it as `UnprocessedUpdate`, because the workflow task
 *   that carried it completed without a word about it (seen with two workers under load). A
 *   rejected Update was never accepted, so no handler of it ran; the next task takes a resend.
 * Undefined for every other failure: it is the caller's to see.
 */
export type ResendReason = 'handing-over' | 'aborted-by-server' | 'not-processed';

/** The ApplicationFailure type the server gives an Update no worker answered. */
const UNPROCESSED_UPDATE = 'UnprocessedUpdate';

export function resendReason(err: unknown): ResendReason | undefined {
  if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
    if (err.cause.type === RUN_ENDING) return 'handing-over';
    if (err.cause.type === UNPROCESSED_UPDATE) return 'not-processed';
  }
  for (let cause = err; cause instanceof Error; cause = cause.cause) {
    if (isGrpcServiceError(cause) && cause.code === FAILED_PRECONDITION) return 'aborted-by-server';
  }
  return undefined;
}

/** A hand-over or an aborted task takes a workflow task or two; a resend waits this long. */
const RESEND_PAUSE_MS = 50;
const RESEND_ATTEMPTS = 200;

/**
 * `send` until it is taken or fails for a reason no resend helps, which it throws as it is;
 * after RESEND_ATTEMPTS turned away, the error `givingUp` makes.
 */
export async function resending<T>(
  send: () => Promise<T>,
  givingUp: (reason: ResendReason, attempts: number) => Error,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      const reason = resendReason(err);
      if (!reason) throw err;
      if (attempt >= RESEND_ATTEMPTS) throw givingUp(reason, attempt);
      await new Promise((r) => setTimeout(r, RESEND_PAUSE_MS));
    }
  }
}
