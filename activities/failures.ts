import { asApplicationFailure } from '../core/failures';

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
