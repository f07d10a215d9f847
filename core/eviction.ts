import { assertEvictionBoundary } from './config';
import { EvictionBoundaryError } from './errors';

/**
 * The two-key check (docs/nightly.md, Nightly reflective consolidation). Every input is a storage or
 * reachability fact about one entry; `gated` is the only trace of salience, and it is a yes/no
 * the gate already decided.
 */
export interface EvictionInput {
  reclaimFloor: number;
  gateThreshold: number;
  /** Below the gate now (dormantAt <= now). */
  gated: boolean;
  /** Key A: a below-gate reader (the nightly refresh) can still reach the entry. */
  reachable: boolean;
  /** now > dormantAt + refreshWindow. */
  refreshWindowElapsed: boolean;
  /** Key B: a summary keeps every fact atom of this entry. */
  subsumedLosslessly: boolean;
  /** A summary of it exists and is flagged lossy_summary. */
  lossySummaryFlagged: boolean;
  /** A live entry is eligible only under an explicit capacity or TTL policy. */
  livePolicy?: 'capacity' | 'ttl';
}

export type EvictionDecision =
  { action: 'evict'; why: string } | { action: 'spill'; why: string } | { action: 'keep'; why: string };

/**
 * Throws EvictionBoundaryError where the policy cannot decide safely
 * (docs/nightly.md, Nightly reflective consolidation).
 */
export function decideEviction(input: EvictionInput): EvictionDecision {
  assertEvictionBoundary(input.reclaimFloor, input.gateThreshold);
  if (!input.gated) {
    return input.livePolicy
      ? { action: 'spill', why: `live entry under an explicit ${input.livePolicy} policy` }
      : { action: 'keep', why: 'live entry and no explicit capacity/TTL policy' };
  }
  if (input.reachable) {
    if (!input.refreshWindowElapsed)
      return { action: 'spill', why: 'dormant, reachable, refresh window open' };
    if (input.subsumedLosslessly)
      return { action: 'evict', why: 'dormant, window elapsed, subsumed by a lossless summary' };
    throw new EvictionBoundaryError(
      input.lossySummaryFlagged
        ? 'only a lossy summary stands in for this entry: evicting it would let consumers substitute stale facts'
        : "no summary keeps this entry's facts: evicting it would leave a silent gap",
      { ...input },
    );
  }
  if (input.refreshWindowElapsed)
    return { action: 'evict', why: 'dormant, unreachable, window elapsed: dead' };
  return { action: 'spill', why: 'dormant, unreachable, refresh window open' };
}

export type ReclaimAction =
  | { action: 'evict'; decision: EvictionDecision }
  | { action: 'spill'; decision: EvictionDecision | { action: 'boundary'; why: string } };

/**
 * How reclaim applies the decision: delete only an `evict` that is also dead (gated, window
 * elapsed, subsumed losslessly — or lossy-flagged where the operator opted in); spill every
 * other candidate, including each EvictionBoundaryError and each live entry.
 */
export function reclaimAction(input: EvictionInput, opts: { evictLossySubsumed: boolean }): ReclaimAction {
  let decision: EvictionDecision;
  try {
    decision = decideEviction(input);
  } catch (err) {
    if (!(err instanceof EvictionBoundaryError)) throw err;
    if (opts.evictLossySubsumed && isDead(input, opts)) {
      return {
        action: 'evict',
        decision: { action: 'evict', why: `opted in to evict lossy-subsumed: ${err.message}` },
      };
    }
    return { action: 'spill', decision: { action: 'boundary', why: err.message } };
  }
  if (decision.action === 'evict' && isDead(input, opts)) return { action: 'evict', decision };
  return { action: 'spill', decision };
}

function isDead(input: EvictionInput, opts: { evictLossySubsumed: boolean }): boolean {
  return (
    input.gated &&
    input.refreshWindowElapsed &&
    (input.subsumedLosslessly || (opts.evictLossySubsumed && input.lossySummaryFlagged))
  );
}
