import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_CLOCK_SKEW_MS } from '../../core/clock';
import { InvalidInputError } from '../../core/errors';
import {
  assertKeptByQueryLog,
  oldestKeptAsOf,
  parseRecallRequest,
  recallRequestSchema,
} from '../../core/recall';
import { DAY_MS, dayOf } from '../../core/salience';

/** A recall is logged at its `asOf`: bounded as a write's time is (not past the clock by more than the skew allowed). */
const now = Date.UTC(2026, 5, 1, 12);
const recallAt = (asOf: number) => ({ agentId: 'a1', query: 'notice period', asOf });

function refusal(asOf: number): InvalidInputError {
  try {
    parseRecallRequest(recallAt(asOf), now);
  } catch (err) {
    return err as InvalidInputError;
  }
  throw new Error(`asOf ${asOf} was accepted`);
}

describe('a recall’s asOf', () => {
  it('is refused, typed and naming asOf, past the clock skew or past what a Date holds', () => {
    for (const asOf of [now + MAX_CLOCK_SKEW_MS + 1, 8.64e15]) {
      const err = refusal(asOf);
      expect(err, String(asOf)).toBeInstanceOf(InvalidInputError);
      expect(err.issues.map((i) => i.path)).toEqual(['asOf']);
    }
  });

  it('is taken up to the clock skew, and may be left out', () => {
    for (const asOf of [0, now, now + MAX_CLOCK_SKEW_MS]) {
      expect(parseRecallRequest(recallAt(asOf), now).asOf).toBe(asOf);
    }
    expect(parseRecallRequest({ agentId: 'a1', query: 'notice period' }, now).asOf).toBeUndefined();
  });

  it('is an instant a Date can hold in the schema HTTP and MCP validate with', () => {
    expect(recallRequestSchema.safeParse(recallAt(8.64e15 + 1)).success).toBe(false);
  });
});

describe('the oldest asOf the query log keeps', () => {
  const instant = fc.integer({ min: 0, max: Date.UTC(2200, 0, 1) });
  const retention = fc.integer({ min: 1, max: 3_650 });

  it('takes exactly the recalls whose day the agent’s last night kept', () => {
    fc.assert(
      fc.property(instant, instant, retention, (lastNight, asOf, days) => {
        const oldest = oldestKeptAsOf(lastNight, days);
        // The night dropped every day before its day less the retention (core/nightly/phases.ts).
        const keptByNight = dayOf(asOf) >= dayOf(lastNight) - days;
        expect(asOf >= oldest).toBe(keptByNight);
        if (keptByNight) expect(() => assertKeptByQueryLog(asOf, oldest, days)).not.toThrow();
        else {
          expect(() => assertKeptByQueryLog(asOf, oldest, days)).toThrow(
            expect.objectContaining({
              type: 'InvalidInput',
              issues: [expect.objectContaining({ path: 'asOf' })],
            }),
          );
        }
      }),
    );
  });

  it('is no later than the retention before the night', () => {
    fc.assert(
      fc.property(instant, retention, (lastNight, days) => {
        expect(oldestKeptAsOf(lastNight, days)).toBeLessThanOrEqual(lastNight - days * DAY_MS);
      }),
    );
  });
});
