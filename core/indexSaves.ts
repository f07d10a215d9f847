/**
 * When a changed vector index is saved. A save writes the whole index and holds the engine's
 * thread, which every index of the process shares, meanwhile (1.4–2.0 s at 510,000 vectors
 * in bench/recall), so a search that arrives during it waits that long. A due save therefore
 * waits for a pause in the process's searches, but not past SAVE_POSTPONE_MAX_MS: an index
 * saved despite searches without pause keeps what a process that starts reads from the feed
 * bounded.
 */

/** A pause in the process's searches this long lets a due save run. */
export const SAVE_QUIET_MS = 1_000;
/** The longest a due save waits for a pause. */
export const SAVE_POSTPONE_MAX_MS = 10 * 60_000;

/**
 * Whether a due save runs now, or how long to wait before asking again. Times are of one
 * monotonic clock (`performance.now()`); `lastSearchAt` is when the process's engine was last
 * asked to search.
 */
export function saveNowOrWait(s: { dueAt: number; lastSearchAt?: number; now: number }): 'save' | number {
  if (s.now - s.dueAt >= SAVE_POSTPONE_MAX_MS) return 'save';
  const quietFor = s.lastSearchAt === undefined ? Infinity : s.now - s.lastSearchAt;
  if (quietFor >= SAVE_QUIET_MS) return 'save';
  return Math.min(SAVE_QUIET_MS - quietFor, s.dueAt + SAVE_POSTPONE_MAX_MS - s.now);
}
