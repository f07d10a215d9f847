import { Context } from '@temporalio/activity';
import { asApplicationFailure } from '../workflows/failures';

type Activity = (...args: never[]) => Promise<unknown>;

/**
 * Every activity, wrapped once: a MemgateError it throws reaches Temporal as an
 * ApplicationFailure of its type (non-retryable unless the error says otherwise), so a bad
 * input or a refused model call is not retried as if the server had blinked.
 */
export function withTypedFailures<T extends Record<string, Activity>>(activities: T): T {
  const wrapped: Record<string, Activity> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: never[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        throw asApplicationFailure(err);
      }
    };
  }
  return wrapped as T;
}

/** How often a running activity reports that its worker lives; well inside `heartbeatTimeout`. */
const LIVENESS_INTERVAL_MS = 5_000;

/**
 * Every activity heartbeats on a timer while it runs, whatever it awaits (a model call, one
 * long store command): a worker process that dies is noticed within the workflows' short
 * heartbeat timeout, and the activity is retried elsewhere. Progress and cancellation are
 * the phases' own heartbeats (activities/consolidation.ts).
 */
export function withLiveness<T extends Record<string, Activity>>(activities: T): T {
  const wrapped: Record<string, Activity> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: never[]) => {
      const ctx = Context.current();
      const timer = setInterval(() => ctx.heartbeat(), LIVENESS_INTERVAL_MS);
      try {
        return await fn(...args);
      } finally {
        clearInterval(timer);
      }
    };
  }
  return wrapped as T;
}
