import type { Entry, Tier } from './entry';
import { awaitsCounting } from './nightly/plans';
import { dayOf } from './salience';

/**
 * An agent's counts by tier and state, kept by the store as its entries change
 * (store/census.ts) so that nothing reads a whole agent to show them (docs/browser.md). Each
 * counted entry has one state key, and a summary one more for whether it is lossy; an entry
 * counts from the night that counts its terms, as the tier counts do (store/db.ts, AgentRecord).
 * A current hot entry's state is the day its salience reaches the gate, so one census answers
 * "dormant as of" any day without rewriting a count when time passes.
 */

/** What the store keeps: the number of entries holding each key, and of tombstones by kind. */
export interface CensusCounts {
  /** `cold`, `superseded`, `expired`, `inactive`, `lossy`, `lossless`, and `day <n>` per dormant day. */
  entries?: Record<string, number>;
  /** Tombstones by `tombstoneKind`. */
  tombstones?: Record<string, number>;
}

/** Keys of a store document's field names: no dots, no leading `$`. */
const DAY_KEY = 'day ';

/**
 * The keys an entry copy counts under in its tier; none while the night has not counted it.
 * Hot entries are superseded, else inactive (a retired summary), else expired, else current
 * and keyed by the day they reach the gate; cold entries are cold, whatever else they are.
 */
export function censusKeys(entry: Entry, tier: Tier): string[] {
  if (awaitsCounting(entry)) return [];
  const keys: string[] = [];
  if (tier === 'cold') keys.push('cold');
  else if (!entry.isActive) keys.push(entry.supersededBy !== undefined ? 'superseded' : 'inactive');
  else if (entry.expiredAt !== undefined) keys.push('expired');
  else keys.push(`${DAY_KEY}${dayOf(entry.dormantAt)}`);
  if (entry.kind === 'summary') keys.push(entry.lossy_summary === false ? 'lossless' : 'lossy');
  return keys;
}

/** A copy of an entry as it was, or is, in a tier. */
export interface Copy {
  entry: Entry;
  tier: Tier;
}

/** What a change from `before` to `after` adds to each key (absent: no copy); empty when none. */
export function censusDelta(before: Copy | undefined, after: Copy | undefined): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const key of before ? censusKeys(before.entry, before.tier) : []) delta[key] = (delta[key] ?? 0) - 1;
  for (const key of after ? censusKeys(after.entry, after.tier) : []) delta[key] = (delta[key] ?? 0) + 1;
  for (const key of Object.keys(delta)) if (delta[key] === 0) delete delta[key];
  return delta;
}

/** The sum of several deltas. */
export function addDeltas(deltas: readonly Record<string, number>[]): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const delta of deltas) for (const [key, n] of Object.entries(delta)) sum[key] = (sum[key] ?? 0) + n;
  for (const key of Object.keys(sum)) if (sum[key] === 0) delete sum[key];
  return sum;
}

/**
 * How a tombstone is counted: by its reason, with what names one entry left out (a summary
 * removed with an erased source names that source), so the kinds stay few.
 */
export function tombstoneKind(reason: string): string {
  const kind = reason.startsWith('erased:') ? 'erased: summary of an erased entry' : reason;
  // A document's field name may hold neither a dot nor a leading `$`.
  return kind.replace(/[.$]/g, '_');
}

/** Keys a summary counts under besides its state. */
const SUMMARY_KEYS = new Set(['lossy', 'lossless']);

/** How many entry copies the counts hold, both tiers: each has one state key. */
export function countedCopies(counts: CensusCounts | undefined): number {
  return Object.entries(counts?.entries ?? {})
    .filter(([key]) => !SUMMARY_KEYS.has(key))
    .reduce((sum, [, n]) => sum + Math.max(0, n), 0);
}

/** The census as the browser shows it, as of an instant. */
export interface Census {
  asOf: number;
  hot: {
    /** Current entries above the gate past the day of `asOf`. */
    active: number;
    /** Current entries that reach the gate on the day of `asOf` (some already have). */
    reachingGate: number;
    /** Current entries below the gate since an earlier day. */
    dormant: number;
    superseded: number;
    expired: number;
    /** Inactive for another reason: summaries retired when a source was superseded. */
    inactive: number;
  };
  cold: number;
  summaries: { lossy: number; lossless: number };
  tombstones: Record<string, number>;
}

/** The counts read as of `asOf` (no count is ever shown below 0: a crash can leave one low). */
export function censusAsOf(counts: CensusCounts | undefined, asOf: number): Census {
  const entries = counts?.entries ?? {};
  const n = (key: string) => Math.max(0, entries[key] ?? 0);
  const hot = { active: 0, reachingGate: 0, dormant: 0 };
  const today = dayOf(asOf);
  for (const [key, value] of Object.entries(entries)) {
    if (!key.startsWith(DAY_KEY)) continue;
    const day = Number(key.slice(DAY_KEY.length));
    const part = day > today ? 'active' : day === today ? 'reachingGate' : 'dormant';
    hot[part] += Math.max(0, value);
  }
  return {
    asOf,
    hot: { ...hot, superseded: n('superseded'), expired: n('expired'), inactive: n('inactive') },
    cold: n('cold'),
    summaries: { lossy: n('lossy'), lossless: n('lossless') },
    tombstones: Object.fromEntries(
      Object.entries(counts?.tombstones ?? {}).flatMap(([kind, v]) => (v > 0 ? [[kind, v]] : [])),
    ),
  };
}
