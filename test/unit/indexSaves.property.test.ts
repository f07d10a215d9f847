import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SAVE_POSTPONE_MAX_MS, SAVE_QUIET_MS, saveNowOrWait } from '../../core/indexSaves';

/** Replays the retries of one due save against a sequence of search times; when it saved. */
function savedAt(dueAt: number, searches: readonly number[]): number {
  let now = dueAt;
  for (;;) {
    const lastSearchAt = searches.filter((t) => t <= now).at(-1);
    const answer = saveNowOrWait({ dueAt, now, ...(lastSearchAt === undefined ? {} : { lastSearchAt }) });
    if (answer === 'save') return now;
    expect(answer).toBeGreaterThan(0);
    now += answer;
  }
}

describe('saveNowOrWait (fast-check)', () => {
  const searchTimes = fc
    .array(fc.integer({ min: 0, max: 2 * SAVE_POSTPONE_MAX_MS }), { maxLength: 200 })
    .map((ts) => [...ts].sort((a, b) => a - b));

  it('saves at the first pause of SAVE_QUIET_MS in the searches, and never later than SAVE_POSTPONE_MAX_MS', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: SAVE_POSTPONE_MAX_MS }), searchTimes, (dueAt, searches) => {
        const at = savedAt(dueAt, searches);
        expect(at).toBeGreaterThanOrEqual(dueAt);
        expect(at).toBeLessThanOrEqual(dueAt + SAVE_POSTPONE_MAX_MS);
        const last = searches.filter((t) => t <= at).at(-1);
        // Saved either in a pause, or because it could wait no longer.
        expect(last === undefined || at - last >= SAVE_QUIET_MS || at === dueAt + SAVE_POSTPONE_MAX_MS).toBe(
          true,
        );
        // And at the first moment it could: no earlier time from the due one was in a pause.
        for (let t = dueAt; t < at; t += 97) {
          const before = searches.filter((s) => s <= t).at(-1);
          expect(before !== undefined && t - before < SAVE_QUIET_MS).toBe(true);
        }
      }),
    );
  });

  it('saves at once when the index was not searched lately', () => {
    expect(saveNowOrWait({ dueAt: 0, now: 5 })).toBe('save');
    expect(saveNowOrWait({ dueAt: 0, now: 5_000, lastSearchAt: 5_000 - SAVE_QUIET_MS })).toBe('save');
    expect(saveNowOrWait({ dueAt: 0, now: 5_000, lastSearchAt: 4_900 })).toBe(SAVE_QUIET_MS - 100);
  });
});
