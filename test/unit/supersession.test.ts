import { describe, expect, it } from 'vitest';
import { supersededWhileEvicted, type SupersessionEntry } from '../../core/nightly/plans';

const f = (id: string, attribute: string, writtenAt: number, isActive = true): SupersessionEntry => ({
  _id: id,
  subject: 'backups',
  attribute,
  writtenAt,
  isActive,
});

describe('supersededWhileEvicted', () => {
  it('pairs a deleted fact with the earliest current fact of its attribute written after it', () => {
    const evicted = [
      { id: 'old-retention', attribute: 'retention', writtenAt: 10 },
      { id: 'old-region', attribute: 'region', writtenAt: 10 },
      { id: 'late-retention', attribute: 'retention', writtenAt: 50 },
    ];
    const stored = [
      f('retention-30', 'retention', 20),
      f('retention-60', 'retention', 40),
      f('region-fra', 'region', 5),
      f('region-ams', 'region', 30, false),
    ];
    expect(supersededWhileEvicted(evicted, stored)).toEqual([
      { sourceId: 'old-retention', supersededBy: 'retention-30' },
    ]);
  });

  it('as the stored rule, a fact restored before it was deleted is superseded only by one written after its restore', () => {
    const evicted = [{ id: 'restored', attribute: 'retention', writtenAt: 10, restoredAt: 30 }];
    expect(supersededWhileEvicted(evicted, [f('before-restore', 'retention', 20)])).toEqual([]);
    expect(
      supersededWhileEvicted(evicted, [f('before-restore', 'retention', 20), f('after', 'retention', 40)]),
    ).toEqual([{ sourceId: 'restored', supersededBy: 'after' }]);
  });

  it('finds nothing without a newer current fact', () => {
    expect(supersededWhileEvicted([{ id: 'x', attribute: 'a', writtenAt: 9 }], [f('y', 'a', 9)])).toEqual([]);
  });
});
