import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_PAGE, nightsRequestSchema } from '../../core/browse';

/**
 * A listing's numbers arrive as query strings (`?before=…&limit=…`) or as a caller's numbers:
 * a whole number in decimal digits is read, anything else refused, never read as 0.
 */
const nights = (query: Record<string, unknown>) => nightsRequestSchema.safeParse({ agentId: 'a1', ...query });

describe("a night listing's before and limit", () => {
  it('read a whole number given in decimal digits or as a number (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 8.64e15 }),
        fc.integer({ min: 1, max: MAX_PAGE }),
        (before, limit) => {
          for (const query of [
            { before, limit },
            { before: String(before), limit: String(limit) },
          ]) {
            const parsed = nights(query);
            expect(parsed.success && parsed.data).toEqual({ agentId: 'a1', before, limit });
          }
        },
      ),
    );
  });

  it('refuse an empty value, blanks, and what is not a whole number in decimal digits', () => {
    for (const bad of ['', ' ', ' 5', '5 ', '1e3', '0x10', '1.5', '-1', 'abc', '+5', 1.5, -1, null]) {
      expect(nights({ before: bad }).success, JSON.stringify(bad)).toBe(false);
      expect(nights({ limit: bad }).success, JSON.stringify(bad)).toBe(false);
    }
    expect(nights({}).success && nights({}).data).toEqual({ agentId: 'a1', limit: 60 });
  });
});
