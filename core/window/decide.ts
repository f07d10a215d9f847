import type { BlockReason, Refusal } from './blocked';
import {
  MAX_WINDOW_SEGMENTS,
  isPinned,
  isStandingDisplacer,
  samePin,
  segmentRef,
  usedTokens,
  type EvictionRecord,
  type PinRef,
  type Segment,
  type SegmentRef,
  type WindowState,
} from './model';

/** Salience is floating point: 0.72 must beat 0.62 by a margin of 0.1. */
const EPSILON = 1e-9;

/**
 * The segments to push out to free `need` tokens, or undefined if the candidates cannot:
 * lowest current salience first (older first on ties), then any taken segment that turned
 * out unnecessary is kept. The last one taken is always needed, so the highest displaced
 * salience is the same as plain lowest-first order.
 */
export function cheapestDisplacement(
  candidates: Segment[],
  need: number,
  needSegments = 0,
): Segment[] | undefined {
  if (need <= 0 && needSegments <= 0) return [];
  const order = [...candidates].sort(
    (a, b) =>
      a.salience - b.salience ||
      a.admittedAtTurn - b.admittedAtTurn ||
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
  );
  const chosen: Segment[] = [];
  let freed = 0;
  for (const s of order) {
    if (freed >= need && chosen.length >= needSegments) break;
    chosen.push(s);
    freed += s.tokens;
  }
  if (freed < need || chosen.length < needSegments) return undefined;
  for (let i = chosen.length - 2; i >= 0; i--) {
    if (freed - chosen[i]!.tokens >= need && chosen.length - 1 >= needSegments) {
      freed -= chosen[i]!.tokens;
      chosen.splice(i, 1);
    }
  }
  return chosen;
}

export type WindowDecision =
  | { action: 'admit'; mode: 'slack' | 'neverAdmitted' | 'swap' | 'evict'; displace: Segment[] }
  | { action: 'refuse'; refusal: Refusal };

function tokensNeeded(state: WindowState, incoming: SegmentRef): number {
  return usedTokens(state) + incoming.tokens - state.settings.capacity;
}

/** At the segment bound, an entry makes room as at capacity: one segment goes for it. */
function segmentsNeeded(state: WindowState): number {
  return Math.max(0, state.segments.length + 1 - MAX_WINDOW_SEGMENTS);
}

function refuse(
  state: WindowState,
  operation: Refusal['operation'],
  incoming: SegmentRef,
  reasons: BlockReason[],
  wouldDisplace: Segment[],
  pins: PinRef[],
): WindowDecision {
  for (const s of wouldDisplace) {
    for (const pin of s.pins) {
      if (!pins.some((p) => p.segmentId === s.id && samePin(p.pin, pin))) pins.push({ segmentId: s.id, pin });
    }
  }
  return {
    action: 'refuse',
    refusal: {
      operation,
      turn: state.turn,
      reasons,
      incoming: segmentRef(incoming),
      wouldDisplace: wouldDisplace.map((s) => ({ ...segmentRef(s), pinned: isPinned(s) })),
      pins,
    },
  };
}

/**
 * A new segment enters; if the window is full, the lowest-salience unpinned segments make
 * room whatever the newcomer's salience (the current turn's content must fit). Pinned
 * segments never move: if the unpinned ones cannot make room, the admission is refused.
 */
export function decideAdmission(state: WindowState, incoming: SegmentRef): WindowDecision {
  const need = tokensNeeded(state, incoming);
  const count = segmentsNeeded(state);
  if (need <= 0 && count <= 0) return { action: 'admit', mode: 'slack', displace: [] };
  const displace = cheapestDisplacement(
    state.segments.filter((s) => !isPinned(s)),
    need,
    count,
  );
  if (displace) return { action: 'admit', mode: 'evict', displace };
  return refuse(
    state,
    'admit',
    incoming,
    ['noUnpinnedRoom'],
    cheapestDisplacement(state.segments, need, count) ?? [],
    [],
  );
}

/**
 * The rehydration rule (docs/windows.md, Context windows). `record` is the segment's last eviction,
 * absent if the window never held it.
 * - never admitted, slack: admit on score; evicted before, slack: admit;
 * - at capacity: swap with the cheapest unpinned set that frees enough, only if the incoming
 *   salience beats every displaced segment by the margin; a never-admitted segment never
 *   displaces anything on a fresh score alone;
 * - always refuse below the threshold, and while the pin of a displacer that forced this
 *   segment out still holds (on the displacer that has stayed in the window since).
 * With `pinGuard` off, pins count for nothing here (to show what the guard prevents).
 */
export function decideRehydration(
  state: WindowState,
  incoming: SegmentRef,
  record: EvictionRecord | undefined,
): WindowDecision {
  const { settings } = state;
  const reasons: BlockReason[] = [];
  const pins: PinRef[] = [];
  if (incoming.salience < settings.rehydrationThreshold) reasons.push('belowThreshold');
  if (settings.pinGuard && record?.displacerPinned) {
    const displacer = state.segments.find((s) => isStandingDisplacer(s, record));
    const live = displacer?.pins.filter((p) => record.displacerPins.some((q) => samePin(p, q))) ?? [];
    if (live.length) {
      reasons.push('evictedByLivePin');
      pins.push(...live.map((pin) => ({ segmentId: record.displacedBy, pin })));
    }
  }
  const need = tokensNeeded(state, incoming);
  const count = segmentsNeeded(state);
  if (need <= 0 && count <= 0) {
    if (reasons.length) return refuse(state, 'rehydrate', incoming, reasons, [], pins);
    return { action: 'admit', mode: record ? 'slack' : 'neverAdmitted', displace: [] };
  }
  if (!record) reasons.push('neverAdmittedAtCapacity');
  const beatsByMargin = (s: Segment) => incoming.salience - s.salience >= settings.margin - EPSILON;
  const movable = (s: Segment) => !settings.pinGuard || !isPinned(s);
  const swap = cheapestDisplacement(
    state.segments.filter((s) => movable(s) && beatsByMargin(s)),
    need,
    count,
  );
  if (swap && reasons.length === 0) return { action: 'admit', mode: 'swap', displace: swap };
  if (swap) return refuse(state, 'rehydrate', incoming, reasons, swap, pins);
  const throughPins = cheapestDisplacement(state.segments.filter(beatsByMargin), need, count);
  if (throughPins) {
    return refuse(state, 'rehydrate', incoming, [...reasons, 'wouldDisplacePinned'], throughPins, pins);
  }
  const overMargin = cheapestDisplacement(state.segments.filter(movable), need, count);
  if (overMargin) {
    return refuse(state, 'rehydrate', incoming, [...reasons, 'marginNotMet'], overMargin, pins);
  }
  return refuse(
    state,
    'rehydrate',
    incoming,
    [...reasons, 'noUnpinnedRoom'],
    cheapestDisplacement(state.segments, need, count) ?? [],
    pins,
  );
}
