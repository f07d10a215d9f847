import { describe, expect, it } from 'vitest';
import { censusAsOf, censusDelta, censusKeys, countedCopies, tombstoneKind } from '../../core/census';
import { buildEntry, memoryPolicy, type Entry } from '../../core/entry';
import { DAY_MS, dayOf } from '../../core/salience';
import { episode } from '../support/memories';

const T = Date.UTC(2025, 5, 10, 12);
const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });

/** A written entry as the night leaves it once it has counted its terms. */
function counted(patch: Partial<Entry> = {}): Entry {
  const { pending: _pending, ...entry } = buildEntry(
    'e1',
    'a1',
    { ...episode('A note.', T), salience: 0.5 },
    policy,
  );
  return { ...entry, ...patch };
}

describe('the census keys of an entry (core/census.ts)', () => {
  it('count a write only once the night has counted its terms', () => {
    const written = buildEntry('e1', 'a1', { ...episode('A note.', T), salience: 0.5 }, policy);
    expect(censusKeys(written, 'hot')).toEqual([]);
    expect(censusKeys(counted(), 'hot')).toEqual([`day ${dayOf(counted().dormantAt)}`]);
  });

  it('give each copy one state, and a summary whether it is lossy', () => {
    expect(censusKeys(counted({ isActive: false, supersededBy: 'e2' }), 'hot')).toEqual(['superseded']);
    expect(censusKeys(counted({ isActive: false }), 'hot')).toEqual(['inactive']);
    expect(censusKeys(counted({ expiredAt: T }), 'hot')).toEqual(['expired']);
    expect(censusKeys(counted({ isActive: false, supersededBy: 'e2' }), 'cold')).toEqual(['cold']);
    expect(censusKeys(counted({ kind: 'summary', lossy_summary: false }), 'cold')).toEqual([
      'cold',
      'lossless',
    ]);
    // A summary is counted from its writing, its terms still pending; lossy unless proven.
    expect(censusKeys(counted({ kind: 'summary', pending: ['terms'] }), 'hot')).toEqual([
      `day ${dayOf(counted().dormantAt)}`,
      'lossy',
    ]);
  });

  it('change by the difference of the keys before and after', () => {
    const live = counted();
    const spilled = { entry: live, tier: 'cold' as const };
    expect(censusDelta({ entry: live, tier: 'hot' }, spilled)).toEqual({
      [`day ${dayOf(live.dormantAt)}`]: -1,
      cold: 1,
    });
    expect(censusDelta(spilled, spilled)).toEqual({});
    expect(censusDelta(spilled, undefined)).toEqual({ cold: -1 });
  });
});

describe('the census as of an instant', () => {
  it('splits the current hot entries by the day they reach the gate', () => {
    const today = dayOf(T);
    const census = censusAsOf(
      {
        entries: {
          [`day ${today - 3}`]: 4,
          [`day ${today}`]: 2,
          [`day ${today + 1}`]: 5,
          cold: 7,
          superseded: 1,
          lossless: 1,
          // A count a crash left low is never shown below 0.
          expired: -1,
        },
        tombstones: { erased: 2, gone: 0 },
      },
      T,
    );
    expect(census).toEqual({
      asOf: T,
      hot: { active: 5, reachingGate: 2, dormant: 4, superseded: 1, expired: 0, inactive: 0 },
      cold: 7,
      summaries: { lossy: 0, lossless: 1 },
      tombstones: { erased: 2 },
    });
    expect(censusAsOf(undefined, T + DAY_MS).hot.active).toBe(0);
    expect(countedCopies({ entries: { [`day ${today}`]: 2, cold: 3, lossless: 1 } })).toBe(5);
  });

  it('counts tombstones by a reason that names no entry, fit to be a field name', () => {
    expect(tombstoneKind('erased')).toBe('erased');
    expect(tombstoneKind('erased: derived from erased entry abc')).toBe('erased: summary of an erased entry');
    expect(tombstoneKind('opted in to evict lossy-subsumed: lost 3.5 kg')).toBe(
      'opted in to evict lossy-subsumed: lost 3_5 kg',
    );
  });
});
