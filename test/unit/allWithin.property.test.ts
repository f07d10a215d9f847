import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { allWithin } from '../../core/allWithin';

describe('allWithin', () => {
  it('runs every item, at most `limit` at once, and answers in the items’ order (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 40 }),
        fc.integer({ min: 1, max: 10 }),
        async (delays, limit) => {
          let running = 0;
          let most = 0;
          const results = await allWithin(delays, limit, async (d) => {
            most = Math.max(most, ++running);
            await new Promise((done) => setTimeout(done, d));
            running--;
            return d * 2;
          });
          expect(results).toEqual(delays.map((d) => d * 2));
          expect(most).toBeLessThanOrEqual(limit);
          if (delays.length > 0) expect(most).toBe(Math.min(limit, delays.length));
        },
      ),
      { numRuns: 50 },
    );
  });
});
