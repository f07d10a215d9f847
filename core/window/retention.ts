import { isStandingDisplacer, type EvictionRecord, type Segment, type WindowState } from './model';

/**
 * The eviction records a window keeps, so its state (carried across continue-as-new) stays
 * bounded however long the session runs. A record is read only as the latest eviction of a
 * segment that is out of the window, so earlier records of a segment and records of a segment
 * back in the window decide nothing and go. Of the rest:
 * - every record whose pinned displacer has stayed in the window is kept, since that pin (or
 *   the same pin set again) can still refuse the rehydration (evictedByLivePin). There is at
 *   most one per entry of a resident segment's `displaced` list: bounded by the segments;
 * - of the others, the most recent `retainedEvictions`. A segment whose record goes is treated
 *   as one the window never held: it may be admitted again, and rehydrating it needs its
 *   tokens and is refused at capacity (neverAdmittedAtCapacity). No pin could refuse it.
 * Every record that goes is counted in `evictionsDropped`.
 */
export function retainEvictions(state: WindowState): WindowState {
  const residents = new Map(state.segments.map((s) => [s.id, s]));
  const seen = new Set<string>();
  const kept: EvictionRecord[] = [];
  let unguarded = 0;
  for (let i = state.evictions.length - 1; i >= 0; i--) {
    const record = state.evictions[i]!;
    if (residents.has(record.segmentId) || seen.has(record.segmentId)) continue;
    seen.add(record.segmentId);
    if (holdsOut(residents, record)) kept.push(record);
    else if (unguarded < state.settings.retainedEvictions) {
      kept.push(record);
      unguarded++;
    }
  }
  if (kept.length === state.evictions.length) return state;
  return {
    ...state,
    evictions: kept.reverse(),
    evictionsDropped: state.evictionsDropped + state.evictions.length - kept.length,
  };
}

/** Whether the record can still refuse its segment's rehydration with evictedByLivePin. */
function holdsOut(residents: ReadonlyMap<string, Segment>, record: EvictionRecord): boolean {
  const displacer = residents.get(record.displacedBy);
  return record.displacerPinned && displacer !== undefined && isStandingDisplacer(displacer, record);
}
