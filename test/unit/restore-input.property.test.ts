import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_EPOCH_MS } from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { parseInput, restoreStepSchema } from '../../core/messages';

/**
 * A restore renews an expired fact until its `freshUntil`: one not after the restore's time
 * would clear the expiry of a fact still expired, so it is refused, naming the field.
 */
const step = (at: number, freshUntil?: number) => ({
  agentId: 'a1',
  entryId: 'e1',
  at,
  ...(freshUntil !== undefined && { freshUntil }),
});

describe("a restore's freshUntil", () => {
  it('is taken only after the restore’s time, and may be left out (fast-check)', () => {
    const instant = fc.integer({ min: 0, max: MAX_EPOCH_MS });
    fc.assert(
      fc.property(instant, instant, (at, freshUntil) => {
        const parse = () => parseInput(restoreStepSchema, step(at, freshUntil), 'restore');
        if (freshUntil > at) {
          expect(parse().freshUntil).toBe(freshUntil);
        } else {
          expect(parse).toThrow(InvalidInputError);
          try {
            parse();
          } catch (err) {
            expect((err as InvalidInputError).issues.map((i) => i.path)).toEqual(['freshUntil']);
          }
        }
        expect(parseInput(restoreStepSchema, step(at), 'restore').freshUntil).toBeUndefined();
      }),
    );
    expect(() => parseInput(restoreStepSchema, step(1_000, 0), 'restore')).toThrow(InvalidInputError);
    expect(() => parseInput(restoreStepSchema, step(1_000, 1_000), 'restore')).toThrow(InvalidInputError);
  });
});
