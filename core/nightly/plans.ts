import { isExpired, type Entry, type PendingWork, type Tier } from '../entry';
import { dormantAt, HOUR_MS, refreshedSalience, type Salience } from '../salience';

/**
 * The nightly pass's pure decisions other than reclaim and clustering
 * (docs/nightly.md, Nightly reflective consolidation): which volatile facts expire, which gated or
 * cold entries a logged query refreshes, which facts a newer one supersedes — and the
 * reversible annotations each of them writes.
 * Every function takes the run's `asOf`, so a run (or a simulation of one) is reproducible.
 */

/** A reversible change to one entry: fields to set and fields to remove. */
export interface EntryPatch {
  set: Partial<Entry>;
  unset: (keyof Entry)[];
}

export function applyPatch<E extends Partial<Entry>>(entry: E, patch: EntryPatch): E {
  const out: Record<string, unknown> = { ...entry, ...patch.set };
  for (const key of patch.unset) delete out[key];
  return out as E;
}

/** One patch doing what each of `patches` does (later ones win on the same field). */
export function combinePatches(...patches: EntryPatch[]): EntryPatch {
  const set = Object.assign({}, ...patches.map((p) => p.set)) as Partial<Entry>;
  const unset = [...new Set(patches.flatMap((p) => p.unset))].filter((k) => !(k in set));
  return { set, unset };
}

/** `work` is done: it leaves the entry's pending list (and an empty list leaves the entry). */
export function settlePatch(entry: Pick<Entry, 'pending'>, work: PendingWork): EntryPatch {
  const rest = (entry.pending ?? []).filter((w) => w !== work);
  return rest.length ? { set: { pending: rest }, unset: [] } : { set: {}, unset: ['pending'] };
}

/**
 * A write not yet in the agent's hot count: the nightly run counts a write with its terms.
 * A summary is counted as the run writes it, so the same night's reclaim sees it in hot.
 */
export function awaitsCounting(entry: Pick<Entry, 'kind' | 'pending'>): boolean {
  return entry.kind !== 'summary' && (entry.pending?.includes('terms') ?? false);
}

/** `work` is due again (a renewed volatile fact awaits its new expiry). */
export function awaitPatch(entry: Pick<Entry, 'pending'>, work: PendingWork): EntryPatch {
  const pending = entry.pending ?? [];
  return { set: { pending: pending.includes(work) ? pending : [...pending, work] }, unset: [] };
}

// Expiry -------------------------------------------------------------------------------

/** A volatile fact past `freshUntil` that the expire phase has not annotated yet. */
export function dueForExpiry(entry: Pick<Entry, 'validity' | 'expiredAt'>, asOf: number): boolean {
  return entry.expiredAt === undefined && isExpired(entry, asOf);
}

export function expirePatch(asOf: number): EntryPatch {
  return { set: { expiredAt: asOf }, unset: [] };
}

/** Reverses expiry: the fact is fresh again until `freshUntil`. */
export function renewPatch(freshUntil: number): EntryPatch {
  return { set: { validity: { volatile: true, freshUntil } }, unset: ['expiredAt'] };
}

// Refresh ------------------------------------------------------------------------------

export interface RefreshPolicy {
  halfLifeMs: number;
  gateThreshold: number;
  refreshWindowMs: number;
  /** The salience a refreshed entry restarts from (never lower than its current value). */
  refreshSalience: number;
  /** A recall refreshes what it found by meaning, too (MEMGATE_REFRESH_BY_MEANING). */
  byMeaning: boolean;
}

export function refreshPolicy(config: {
  halfLifeHours: number;
  gateThreshold: number;
  refreshWindowHours: number;
  refreshSalience: number;
  refreshByMeaning: boolean;
}): RefreshPolicy {
  return {
    halfLifeMs: config.halfLifeHours * HOUR_MS,
    gateThreshold: config.gateThreshold,
    refreshWindowMs: config.refreshWindowHours * HOUR_MS,
    refreshSalience: config.refreshSalience,
    byMeaning: config.refreshByMeaning,
  };
}

export type RefreshEntry = Pick<
  Entry,
  '_id' | 'terms' | 'salience' | 'dormantAt' | 'isActive' | 'validity' | 'expiredAt'
>;

/** A query matches an entry holding at least half of the query's terms. */
export function queryMatches(queryTerms: readonly string[], entryTerms: ReadonlySet<string>): boolean {
  if (queryTerms.length === 0) return false;
  let shared = 0;
  for (const t of queryTerms) if (entryTerms.has(t)) shared++;
  return shared * 2 >= queryTerms.length;
}

/** The distinct term sets of the logged queries, indexed by term for matching many entries. */
export class QueryIndex {
  private readonly queries: string[][] = [];
  private readonly byTerm = new Map<string, number[]>();

  constructor(queryTerms: Iterable<readonly string[]>) {
    const seen = new Set<string>();
    for (const q of queryTerms) {
      const distinct = [...new Set(q)].sort();
      const key = distinct.join('\0');
      if (distinct.length === 0 || seen.has(key)) continue;
      seen.add(key);
      const index = this.queries.push(distinct) - 1;
      for (const t of distinct) {
        const list = this.byTerm.get(t);
        if (list) list.push(index);
        else this.byTerm.set(t, [index]);
      }
    }
  }

  get size(): number {
    return this.queries.length;
  }

  matches(entryTerms: readonly string[]): boolean {
    const have = new Set(entryTerms);
    const tried = new Set<number>();
    for (const t of have) {
      for (const q of this.byTerm.get(t) ?? []) {
        if (tried.has(q)) continue;
        tried.add(q);
        if (queryMatches(this.queries[q]!, have)) return true;
      }
    }
    return false;
  }
}

/**
 * Who a logged query may refresh: an active, unexpired entry that is either cold, or hot,
 * gated and still inside its refresh window (`asOf <= dormantAt + refreshWindow`).
 */
export function refreshEligible(
  entry: RefreshEntry,
  tier: Tier,
  asOf: number,
  policy: RefreshPolicy,
): boolean {
  if (!entry.isActive || isExpired(entry, asOf)) return false;
  if (tier === 'cold') return true;
  return entry.dormantAt <= asOf && asOf <= entry.dormantAt + policy.refreshWindowMs;
}

export interface RefreshStep {
  id: string;
  tier: Tier;
  salience: Salience;
  dormantAt: number;
}

/**
 * The refreshes the logged queries call for: an eligible entry that shares half a query's
 * terms, or (with `byMeaning`) that a recall found by meaning, its similarity judged then
 * against the recall's floor, so the night needs no embeddings endpoint to decide.
 */
export function planRefresh(
  candidates: readonly { entry: RefreshEntry; tier: Tier }[],
  queries: QueryIndex,
  foundByMeaning: ReadonlySet<string>,
  asOf: number,
  policy: RefreshPolicy,
): RefreshStep[] {
  const steps: RefreshStep[] = [];
  for (const { entry, tier } of candidates) {
    const matched = queries.matches(entry.terms) || (policy.byMeaning && foundByMeaning.has(entry._id));
    if (!refreshEligible(entry, tier, asOf, policy) || !matched) continue;
    const salience = refreshedSalience(entry.salience, asOf, policy.halfLifeMs, policy.refreshSalience);
    steps.push({
      id: entry._id,
      tier,
      salience,
      dormantAt: dormantAt(salience, policy.halfLifeMs, policy.gateThreshold),
    });
  }
  return steps;
}

export function refreshPatch(step: Pick<RefreshStep, 'salience' | 'dormantAt'>, asOf: number): EntryPatch {
  return { set: { salience: step.salience, dormantAt: step.dormantAt, refreshedAt: asOf }, unset: [] };
}

// Supersession -------------------------------------------------------------------------

export type SupersessionEntry = Pick<
  Entry,
  '_id' | 'subject' | 'attribute' | 'writtenAt' | 'isActive' | 'supersededBy' | 'restoredAt'
>;

export interface SupersessionStep {
  olderId: string;
  newerId: string;
}

/**
 * Within each (subject, attribute), an active fact is superseded by the next one written
 * after it — but a restored fact only by one written after its restore, so an operator's
 * restore sticks until genuinely newer evidence arrives. Already-superseded facts keep
 * their link, so the chain stays walkable.
 */
export function planSupersession(entries: readonly SupersessionEntry[]): SupersessionStep[] {
  const groups = new Map<string, SupersessionEntry[]>();
  for (const e of entries) {
    if (e.subject === undefined || e.attribute === undefined) continue;
    const key = `${e.subject}\0${e.attribute}`;
    const group = groups.get(key);
    if (group) group.push(e);
    else groups.set(key, [e]);
  }
  const steps: SupersessionStep[] = [];
  for (const group of groups.values()) {
    group.sort((a, b) => a.writtenAt - b.writtenAt || (a._id < b._id ? -1 : 1));
    group.forEach((older, i) => {
      if (!older.isActive || older.supersededBy !== undefined) return;
      const protectedUntil = older.restoredAt ?? -Infinity;
      const newer = group.slice(i + 1).find((e) => e.writtenAt > protectedUntil);
      if (newer) steps.push({ olderId: older._id, newerId: newer._id });
    });
  }
  return steps.sort((a, b) => (a.olderId < b.olderId ? -1 : a.olderId > b.olderId ? 1 : 0));
}

/** A fact reclaim deleted, as its tombstone keeps it: enough to tell that a newer one replaced it. */
export interface EvictedFact {
  id: string;
  attribute: string;
  writtenAt: number;
  /** Restored before it was deleted: facts written before this do not supersede it. */
  restoredAt?: number;
}

/**
 * Facts deleted before a newer fact about the same subject and attribute arrived: nothing
 * stored is left to mark superseded, but a summary standing in for one still asserts its
 * value, so it must be retired like the summary of a stored superseded fact
 * (docs/invariants.md, Current summaries). Each is paired with the earliest current fact
 * written after it, and after its restore if it was restored (as planSupersession).
 */
export function supersededWhileEvicted(
  evicted: readonly EvictedFact[],
  facts: readonly SupersessionEntry[],
): { sourceId: string; supersededBy: string }[] {
  const out: { sourceId: string; supersededBy: string }[] = [];
  for (const e of evicted) {
    const newer = facts
      .filter(
        (f) =>
          f.isActive &&
          f.attribute === e.attribute &&
          f.writtenAt > e.writtenAt &&
          f.writtenAt > (e.restoredAt ?? -Infinity),
      )
      .sort((a, b) => a.writtenAt - b.writtenAt || (a._id < b._id ? -1 : 1))[0];
    if (newer) out.push({ sourceId: e.id, supersededBy: newer._id });
  }
  return out.sort((a, b) => (a.sourceId < b.sourceId ? -1 : a.sourceId > b.sourceId ? 1 : 0));
}

export function supersedePatch(newerId: string): EntryPatch {
  return { set: { isActive: false, supersededBy: newerId }, unset: [] };
}

export function supersedesPatch(olderId: string): EntryPatch {
  return { set: { supersedes: olderId }, unset: [] };
}

/** Reverses supersession: clears `isActive=false` and `supersededBy`, and remembers when. */
export function restorePatch(at: number): EntryPatch {
  return { set: { isActive: true, restoredAt: at }, unset: ['supersededBy'] };
}
