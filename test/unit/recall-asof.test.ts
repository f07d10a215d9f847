import { describe, expect, it } from 'vitest';
import { MAX_CLOCK_SKEW_MS } from '../../core/clock';
import { InvalidInputError } from '../../core/errors';
import { parseRecallRequest, recallRequestSchema } from '../../core/recall';

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
