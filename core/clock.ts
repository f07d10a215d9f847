import { InvalidInputError } from './errors';

/**
 * How far past the deciding clock an instant may lie: the caller's clock and the worker's
 * differ a little. Further ahead, a run would decide as if that time had come (and a write
 * dated there would carry a salience above its base).
 */
export const MAX_CLOCK_SKEW_MS = 5 * 60_000;

/** An instant given by a caller may not lie ahead of `now` by more than the skew allowed. */
export function assertNotAhead(at: number, now: number, path: string, what: string): void {
  if (at > now + MAX_CLOCK_SKEW_MS) {
    throw new InvalidInputError(`invalid ${what}`, [
      {
        path,
        message: `${new Date(at).toISOString()} is in the future (now ${new Date(now).toISOString()})`,
      },
    ]);
  }
}
