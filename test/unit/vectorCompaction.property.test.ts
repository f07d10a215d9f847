import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPACT_MIN_SCRUBS, COMPACT_SCRUB_SHARE, compactionDue } from '../../core/vectorCompaction';

/**
 * An index under a sequence of adds and removals, as the engine keeps it (a removal leaves a
 * scrub, an add takes a scrub's slot first), built afresh whenever compactionDue says so.
 */
function replay(start: number, changes: readonly ('add' | 'remove')[]) {
  const index = { size: start, scrubs: 0 };
  let removals = 0;
  let rebuilt = 0;
  for (const change of changes) {
    if (change === 'add') {
      index.size++;
      if (index.scrubs > 0) index.scrubs--;
    } else if (index.size > 0) {
      index.size--;
      index.scrubs++;
      removals++;
    }
    if (compactionDue(index)) {
      rebuilt += index.size;
      index.scrubs = 0;
    }
  }
  return { removals, rebuilt };
}

describe('compactionDue (fast-check)', () => {
  const changes = fc.array(fc.constantFrom<'add' | 'remove'>('add', 'remove'), { maxLength: 3_000 });

  it('rebuilds fewer vectors than the removals divided by the share: the work is paid for by the removals', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2_000 }), changes, (start, seq) => {
        const { removals, rebuilt } = replay(start, seq);
        expect(rebuilt).toBeLessThanOrEqual(removals / COMPACT_SCRUB_SHARE);
      }),
    );
  });

  it('never rebuilds an index for fewer than COMPACT_MIN_SCRUBS scrubs', () => {
    fc.assert(
      fc.property(fc.nat(COMPACT_MIN_SCRUBS - 1), fc.nat(), (scrubs, size) => {
        expect(compactionDue({ scrubs, size })).toBe(false);
      }),
    );
  });
});
