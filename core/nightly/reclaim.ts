import { assertEvictionBoundary } from '../config';
import { isExpired, lastWriteAt, type Entry, type EntryKind } from '../entry';
import { reclaimAction, type EvictionInput, type ReclaimAction } from '../eviction';
import { HOUR_MS } from '../salience';

/**
 * What a reclaim ranking may see of an entry: storage signals only
 * (docs/invariants.md, Salience-blind ranking). It is built field by field from the entry,
 * so neither the type nor the object carries salience or anything derived from it
 * (`dormantAt`, the gate).
 */
export interface StorageView {
  readonly id: string;
  readonly kind: EntryKind;
  readonly tokens: number;
  readonly writtenAt: number;
  /** The last time the document was written: the original write or a refresh. */
  readonly lastWriteAt: number;
  readonly volatile: boolean;
  readonly freshUntil?: number;
  /** Explicitly invalidated: superseded or expired. */
  readonly invalidated: boolean;
}

/** The order in which reclaim takes candidates; the first in order is reclaimed first. */
export interface ReclaimRanking {
  readonly name: string;
  compare(a: StorageView, b: StorageView): number;
}

export const oldestWriteFirst: ReclaimRanking = {
  name: 'oldest-write-first',
  compare: (a, b) => a.lastWriteAt - b.lastWriteAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
};

/**
 * The fields of an entry reclaim reads: storage signals plus the two-key check's facts, and
 * the `lastWriteKey` that an entry stored before write days were kept lacks.
 */
export type ReclaimEntry = Pick<
  Entry,
  | '_id'
  | 'lastWriteKey'
  | 'kind'
  | 'tokens'
  | 'writtenAt'
  | 'refreshedAt'
  | 'validity'
  | 'expiredAt'
  | 'isActive'
  | 'dormantAt'
  | 'subsumedBy'
  | 'pending'
>;

export function storageView(e: ReclaimEntry): StorageView {
  const view: {
    -readonly [K in keyof StorageView]: StorageView[K];
  } = {
    id: e._id,
    kind: e.kind,
    tokens: e.tokens,
    writtenAt: e.writtenAt,
    lastWriteAt: lastWriteAt(e),
    volatile: e.validity.volatile,
    invalidated: !e.isActive || e.expiredAt !== undefined,
  };
  if (e.validity.freshUntil !== undefined) view.freshUntil = e.validity.freshUntil;
  return view;
}

export interface ReclaimPolicy {
  hotCapacity: number;
  highWatermark: number;
  lowWatermark: number;
  reclaimFloor: number;
  gateThreshold: number;
  refreshWindowMs: number;
  evictLossySubsumed: boolean;
}

export function reclaimPolicy(config: {
  hotCapacity: number;
  highWatermark: number;
  lowWatermark: number;
  reclaimFloor: number;
  gateThreshold: number;
  refreshWindowHours: number;
  evictLossySubsumed: boolean;
}): ReclaimPolicy {
  return {
    hotCapacity: config.hotCapacity,
    highWatermark: config.highWatermark,
    lowWatermark: config.lowWatermark,
    reclaimFloor: config.reclaimFloor,
    gateThreshold: config.gateThreshold,
    refreshWindowMs: config.refreshWindowHours * HOUR_MS,
    evictLossySubsumed: config.evictLossySubsumed,
  };
}

/** How many hot entries must leave: none up to the high watermark, else down to the low one. */
export function reclaimTarget(hotCount: number, policy: ReclaimPolicy): number {
  if (hotCount <= policy.hotCapacity * policy.highWatermark) return 0;
  return Math.max(0, hotCount - Math.floor(policy.hotCapacity * policy.lowWatermark));
}

export interface ReclaimStep {
  id: string;
  action: ReclaimAction['action'];
  why: string;
  /** Position in the storage ranking (0 = reclaimed first). */
  rank: number;
  /** The two-key check's inputs, for the ledger. */
  inputs: EvictionInput;
  /** The summary standing in for an evicted entry, and whether it lost facts. */
  standIn?: { summaryId: string; lossy: boolean };
}

/**
 * The reclaim plan (docs/nightly.md, Nightly reflective consolidation): rank every hot entry by
 * storage signals alone, take the first `reclaimTarget` of them, and for each apply
 * `reclaimAction` — evict only what the two-key check proves dead, spill everything else.
 * Salience enters only as the `gated` yes/no of the eviction input, after the candidates
 * are chosen (docs/invariants.md, Gating is not lifecycle; Salience-blind ranking).
 */
export function planReclaim(
  hot: readonly ReclaimEntry[],
  asOf: number,
  policy: ReclaimPolicy,
  ranking: ReclaimRanking = oldestWriteFirst,
): ReclaimStep[] {
  return planReclaimOf(hot, reclaimTarget(hot.length, policy), asOf, policy, ranking);
}

/**
 * The same plan from `candidates` that hold hot's first `need` entries in the ranking's order
 * (every hot entry left out ranks after all of them): reclaim reads hot from its oldest write
 * day until it has them, rather than every entry.
 */
export function planReclaimOf(
  candidates: readonly ReclaimEntry[],
  need: number,
  asOf: number,
  policy: ReclaimPolicy,
  ranking: ReclaimRanking = oldestWriteFirst,
): ReclaimStep[] {
  // A policy that cannot tell dormant from dead plans nothing, even with room to spare
  // (docs/invariants.md, Eviction boundary).
  assertEvictionBoundary(policy.reclaimFloor, policy.gateThreshold);
  if (need === 0) return [];
  const byId = new Map(candidates.map((e) => [e._id, e]));
  const ranked = candidates.map(storageView).sort((a, b) => ranking.compare(a, b));
  return ranked.slice(0, need).map((view, rank) => reclaimStep(byId.get(view.id)!, rank, asOf, policy));
}

/** The two-key check's verdict on one ranked candidate: evict only what it proves dead, else spill. */
export function reclaimStep(
  entry: ReclaimEntry,
  rank: number,
  asOf: number,
  policy: ReclaimPolicy,
): ReclaimStep {
  const inputs = evictionInput(entry, asOf, policy);
  const result = reclaimAction(inputs, { evictLossySubsumed: policy.evictLossySubsumed });
  const step: ReclaimStep = { id: entry._id, action: result.action, why: result.decision.why, rank, inputs };
  if (result.action === 'evict') {
    const standIn = pickStandIn(entry, policy.evictLossySubsumed);
    if (standIn) step.standIn = standIn;
  }
  return step;
}

/** The facts of the two-key check for one entry at `asOf`. */
export function evictionInput(entry: ReclaimEntry, asOf: number, policy: ReclaimPolicy): EvictionInput {
  const subsumers = entry.subsumedBy ?? [];
  return {
    reclaimFloor: policy.reclaimFloor,
    gateThreshold: policy.gateThreshold,
    gated: entry.dormantAt <= asOf,
    // Key A: the nightly refresh reads every gated hot entry and every cold one.
    reachable: true,
    refreshWindowElapsed: asOf > entry.dormantAt + policy.refreshWindowMs,
    subsumedLosslessly: subsumers.some((s) => s.lossless),
    lossySummaryFlagged: subsumers.some((s) => !s.lossless),
    // Reclaim is the explicit capacity policy under which a live entry may leave hot.
    livePolicy: 'capacity',
  };
}

function pickStandIn(
  entry: ReclaimEntry,
  evictLossySubsumed: boolean,
): { summaryId: string; lossy: boolean } | undefined {
  const subsumers = entry.subsumedBy ?? [];
  const lossless = subsumers.find((s) => s.lossless);
  if (lossless) return { summaryId: lossless.summaryId, lossy: false };
  const lossy = evictLossySubsumed ? subsumers.find((s) => !s.lossless) : undefined;
  return lossy ? { summaryId: lossy.summaryId, lossy: true } : undefined;
}

/**
 * Whether a summary can stand in for an entry reclaim is about to delete: only while it is
 * active, unexpired and, when it claims to be lossless, holds every fact atom of the entry
 * (docs/invariants.md, Lossy unless proven). Checked against the summary as it is when the
 * entry is deleted, not as the plan saw it.
 */
export function standsIn(
  summary: Pick<Entry, 'isActive' | 'validity' | 'atoms'>,
  entry: Pick<Entry, 'atoms'>,
  lossy: boolean,
  asOf: number,
): boolean {
  if (!summary.isActive || isExpired(summary, asOf)) return false;
  if (lossy) return true;
  const held = new Set(summary.atoms);
  return entry.atoms.every((a) => held.has(a));
}
