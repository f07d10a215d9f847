import { asApplicationFailure } from '../workflows/failures';

/** Runs an activity body so that a MemgateError reaches Temporal as an ApplicationFailure of its type. */
export async function withTypedFailures<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw asApplicationFailure(err);
  }
}
