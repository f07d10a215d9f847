import { CancelledFailure, Context } from '@temporalio/activity';
import type { NightStore } from '../core/nightly/phases';

export type Activity = (...args: never[]) => Promise<unknown>;

/** How often a running activity reports that its worker lives; well inside `heartbeatTimeout`. */
const LIVENESS_INTERVAL_MS = 5_000;

/**
 * Every activity heartbeats on a timer while it runs, whatever it awaits (a model call, one
 * long store command): a worker process that dies is noticed within the workflows' short
 * heartbeat timeout, and the activity is retried elsewhere. Progress and cancellation are
 * the phases' own heartbeats (activities/nightly.ts).
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

/**
 * Heartbeat, or stop if the run was cancelled: a phase calls this before every store call
 * and for every batch, so a lost worker shows up within the heartbeat timeout and a
 * cancelled run stops at its next step (CancelledFailure) instead of finishing a phase that
 * nobody waits for. Every phase is idempotent, so stopping anywhere is safe.
 */
export function heartbeat(detail?: Record<string, number> | string): void {
  const ctx = Context.current();
  if (ctx.cancellationSignal.aborted) throw new CancelledFailure('the run was cancelled');
  ctx.heartbeat(detail);
}

async function* heartbeatEach<T>(batches: AsyncIterable<T>): AsyncGenerator<T> {
  for await (const batch of batches) {
    heartbeat();
    yield batch;
  }
}

/** The night's store with a heartbeat before each call and each batch it yields. */
export function heartbeating(night: NightStore): NightStore {
  return new Proxy(night, {
    get(target, key) {
      const member: unknown = Reflect.get(target, key);
      if (typeof member !== 'function') return member;
      return (...args: unknown[]) => {
        heartbeat();
        const out: unknown = member.apply(target, args);
        return out !== null && typeof out === 'object' && Symbol.asyncIterator in out
          ? heartbeatEach(out as AsyncIterable<unknown>)
          : out;
      };
    },
  });
}
