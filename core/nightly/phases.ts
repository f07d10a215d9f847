import {
  assessSummary,
  buildSummaryEntry,
  clusterable,
  CLUSTER_MAX_POSTINGS,
  nearDuplicateClusters,
  type ClusterOptions,
  type MeaningNeighbours,
} from './clusters';
import { oldestWriteDay, type Entry, type MemoryPolicy, type PendingWork, type Tier } from '../entry';
import {
  awaitsCounting,
  dueForExpiry,
  planRefresh,
  planSupersession,
  QueryIndex,
  supersededWhileEvicted,
  type EvictedFact,
  type RefreshPolicy,
  type RefreshStep,
  type SupersessionStep,
} from './plans';
import { DAY_MS, dayOf } from '../salience';
import { POSTINGS_BUDGET, rankCandidates } from '../recall';
import {
  planReclaim,
  planReclaimOf,
  reclaimTarget,
  reclaimStep,
  standsIn,
  type ReclaimEntry,
  type ReclaimPolicy,
  type ReclaimStep,
} from './reclaim';
import type { CountsOf, PassPhaseName } from './registry';

/**
 * The nightly pass for one agent (docs/nightly.md, Nightly reflective consolidation): its
 * phases, in the order core/nightly/registry.ts lists them, written once over `NightStore`,
 * which the MongoDB store (store/nightStore.ts) and the in-memory store of the simulations
 * implement, so a simulation runs the code that runs at night. Every read is by equality on indexed fields
 * (docs/invariants.md, Index-driven): a phase finds its work through the entries' `pending`
 * lists, terms and subjects, so its cost follows what changed since the last run, not the size
 * of the store. Every phase is idempotent: rerun after a crash at any point, it finishes the
 * same work.
 */

export interface NightRun {
  agentId: string;
  asOf: number;
  runId: string;
}

export interface Located {
  entry: Entry;
  tier: Tier;
}

/** What the refresh phase reads of a logged query: its terms and the entries it returned. */
export interface LoggedQuery {
  terms: string[];
  hitIds: string[];
  /** The hits it found by meaning (semantically, or both ways). */
  meaningIds: string[];
}

export interface NightPolicy {
  memory: MemoryPolicy;
  refresh: RefreshPolicy;
  reclaim: ReclaimPolicy;
  cluster: ClusterOptions;
  /** Entries per batch in reads and moves. */
  batch: number;
  /** Days the query log keeps a recall. */
  queryLogRetentionDays: number;
}

/** What the nightly phases need of one agent's store, in the domain's words. */
export interface NightStore {
  /** Entries awaiting `work`, hot copies first (mid-move an entry is in both), a batch at a time. */
  pending(work: PendingWork): AsyncIterable<Located[]>;
  /** For each of the terms, in their order, the entries of a tier holding it, at most `limit`. */
  withTerms(tier: Tier, terms: readonly string[], limit: number): AsyncIterable<Entry[]>;
  /** Hot entries whose `dormantAt` is in `[from, to]`, a batch at a time. */
  dormantBetween(from: number, to: number): AsyncIterable<Entry[]>;
  /** Facts about a subject in either tier, hot copies first. */
  factsAbout(subject: string): Promise<Located[]>;
  /** How many stored entries hold each term (0 when never counted). */
  documentFrequencies(terms: readonly string[]): Promise<Map<string, number>>;
  /** Counts the entries' terms into the document frequencies (and new hot entries into the hot count), and settles their `terms` work. */
  countTerms(found: readonly Located[]): Promise<void>;
  settle(ids: readonly string[], work: PendingWork): Promise<void>;
  /** The queries logged after `since` (all, when undefined) up to the run's `asOf`. */
  queriesSince(since: number | undefined): Promise<LoggedQuery[]>;
  /** The `asOf` of the agent's latest completed run before this one. */
  previousRunAsOf(): Promise<number | undefined>;
  /**
   * Entries per tier (`hot` undefined when it was never counted), `hotWrittenFrom`: a day on or
   * after which every counted hot entry was last written, undefined until reclaim has given
   * every hot entry its write day, and whether a retried phase left the hot count in doubt.
   */
  tierCounts(): Promise<{
    hot: number | undefined;
    cold: number;
    /** How many times the hot count changed, for `setHotCount` to tell whether one did since. */
    hotChanges?: number;
    hotWrittenFrom?: number;
    hotCountInDoubt?: true;
  }>;
  /** Every hot entry, as reclaim reads it (storage signals and the two-key facts). */
  hotStorage(): AsyncIterable<ReclaimEntry[]>;
  /** The hot entries last written on this day (by `lastWriteKey`), as reclaim reads them. */
  hotWrittenOn(day: number): Promise<ReclaimEntry[]>;
  /** The count read whole, unless it changed since `tierCounts` said `hotChanges` (then in doubt). */
  setHotCount(hot: number, changesSeen: number | undefined): Promise<void>;
  /**
   * Gives those of these entries stored before write days were kept their `lastWriteKey`, each
   * only while its write times are as read: false when one changed meanwhile (it may lack it).
   */
  keyWriteDays(entries: readonly ReclaimEntry[]): Promise<boolean>;
  /** `hotWrittenFrom` becomes `day`, unless it is no longer `was` (a count lowered it meanwhile). */
  setHotWrittenFrom(day: number, was: number | undefined): Promise<void>;
  /** Every stored copy of these ids (two for an entry mid-move); ids no longer stored are left out. */
  copies(ids: readonly string[]): Promise<Located[]>;
  /** The entries of these ids still stored (either tier), oldest first, and the ids no longer stored. */
  stored(ids: readonly string[]): Promise<{ present: Entry[]; gone: string[] }>;
  /** The deterministic id of the summary of these sources: the same sources, the same summary. */
  summaryId(sourceIds: readonly string[]): string;
  /** Summaries this run already wrote (a retried consolidate phase completes them). */
  summariesOfRun(): Promise<Entry[]>;
  /** Facts about the subject that reclaim deleted (from their tombstones). */
  evictedFactsAbout(subject: string): Promise<EvictedFact[]>;
  /** Summaries built from the entry, in either tier, retired ones too. */
  summariesOf(sourceId: string): Promise<Entry[]>;
  expire(found: Located): Promise<void>;
  /** Hot steps raise salience in place (guarded by the version the plan read); cold steps rehydrate. */
  /** Each step with its entry as the plan read it (its writes are guarded by that version). */
  refresh(steps: readonly (RefreshStep & { entry: Entry })[]): Promise<void>;
  /** These hot entries, each at the version read, leave default recall's postings (MongoDB's only). */
  dropLiveKeys(entries: readonly Entry[]): Promise<void>;
  /** Recalls logged on days before `before` leave the query log. */
  dropQueries(before: number): Promise<void>;
  /**
   * Stores the summary unless either tier holds it already, and links each source to the
   * summary as stored, lossless when the stored text keeps all of the source's facts: a
   * retried phase whose model wrote other text finds the earlier text, and the links agree
   * with what stands in. A retired summary of exactly these sources, all current again, is
   * reinstated.
   */
  writeSummary(summary: Entry, sources: readonly { id: string; text: string }[]): Promise<void>;
  supersede(step: SupersessionStep): Promise<void>;
  /**
   * The summary is retired (`retirePatch`) and then each of its sources released from it
   * (`releasePatch`), every step idempotent, with a ledger record naming the superseded source.
   */
  retireSummary(summary: Entry, cause: SupersededSource): Promise<void>;
  spill(batch: readonly { step: ReclaimStep; entry: Entry }[]): Promise<void>;
  /**
   * False when the entry changed since it was read (it stays, and no tombstone is left) or was
   * erased meanwhile (its erasure's tombstone stays).
   */
  evict(entry: Entry, step: ReclaimStep): Promise<boolean>;
  /** How many `event` records this run has written: a phase's count, exact across retries. */
  counted(event: string): Promise<number>;
}

/** How far back a first night looks for work keyed by day (later nights start where the last one did). */
export const FIRST_NIGHT_LOOKBACK_DAYS = 60;

/** Called as a phase makes progress: the activity heartbeats it. */
export type Progress = (detail: Record<string, number>) => void;

const quiet: Progress = () => undefined;

async function collect<T>(batches: AsyncIterable<T[]>, progress: Progress): Promise<T[]> {
  const all: T[] = [];
  for await (const batch of batches) {
    all.push(...batch);
    progress({ read: all.length });
  }
  return all;
}

/** Volatile facts past `freshUntil` leave default recall: annotated, never deleted. */
export async function expirePhase(
  night: NightStore,
  run: NightRun,
  progress: Progress = quiet,
): Promise<{ expired: number }> {
  for (const found of await collect(night.pending('expire'), progress)) {
    if (dueForExpiry(found.entry, run.asOf)) await night.expire(found);
  }
  return { expired: await night.counted('expire') };
}

/**
 * The terms a logged query finds its entries by: an entry matches a query when it holds at
 * least half of the query's terms (`queryMatches`), so it holds one of the `⌊n/2⌋ + 1` rarest.
 * Of those, a term held by more entries than recall would read is skipped: what it alone
 * would match is not what the query was about.
 */
export function refreshProposers(
  queryTerms: readonly string[],
  df: ReadonlyMap<string, number>,
  budget: number,
): string[] {
  const distinct = [...new Set(queryTerms)].sort(
    (a, b) => (df.get(a) ?? 0) - (df.get(b) ?? 0) || (a < b ? -1 : a > b ? 1 : 0),
  );
  return distinct.slice(0, Math.floor(distinct.length / 2) + 1).filter((t) => (df.get(t) ?? 0) <= budget);
}

/**
 * Which cold entries come back to hot. One a recall returned among its best hits (`wanted`) was
 * used by the agent, and comes back (docs/nightly.md, Nightly reflective consolidation). One a logged
 * query merely matches comes back only into the room below the low watermark, newest writes
 * first: under pressure, each such rehydration would push another entry out to cold the same
 * night. Refreshes of hot entries are not limited. A cold entry left out stays where deep
 * recall finds it.
 */
export function limitRehydration(
  steps: readonly (RefreshStep & { writtenAt: number })[],
  wanted: ReadonlySet<string>,
  hotCount: number,
  policy: ReclaimPolicy,
): RefreshStep[] {
  let room = Math.max(0, Math.floor(policy.hotCapacity * policy.lowWatermark) - hotCount);
  const cold = steps
    .filter((s) => s.tier === 'cold' && !wanted.has(s.id))
    .sort((a, b) => b.writtenAt - a.writtenAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const admitted = new Set(steps.filter((s) => s.tier === 'cold' && wanted.has(s.id)).map((s) => s.id));
  room -= admitted.size;
  for (const s of cold) {
    if (room-- <= 0) break;
    admitted.add(s.id);
  }
  return steps
    .filter((s) => s.tier === 'hot' || admitted.has(s.id))
    .map(({ id, tier, salience, dormantAt }) => ({ id, tier, salience, dormantAt }));
}

/** A recall's best hits, as many as default recall returns: what the agent read first. */
export const WANTED_RANK = 10;

/**
 * The cold entries a logged recall returned among its `WANTED_RANK` best, ranked again
 * tonight by the core ranker over the hits as they now are (the same decision wherever the
 * pass runs). A deep recall sweeping a subject returns a couple of hundred hits; its tail was
 * context, and bringing all of it back would push as many other entries out to cold.
 */
export function wantedFromCold(
  logged: readonly LoggedQuery[],
  located: ReadonlyMap<string, Located>,
  asOf: number,
  memory: MemoryPolicy,
): Set<string> {
  const wanted = new Set<string>();
  for (const q of logged) {
    const hits = q.hitIds.flatMap((id) => located.get(id) ?? []);
    if (!hits.some((h) => h.tier === 'cold')) continue;
    for (const hit of rankCandidates(q.terms, hits, { now: asOf, k: WANTED_RANK, ...memory })) {
      if (hit.tier === 'cold') wanted.add(hit.id);
    }
  }
  return wanted;
}

/**
 * The night's new entries are counted into the document frequencies first. Then the
 * queries logged since the agent's previous run raise the salience of the gated hot entries
 * they match inside their refresh window, and bring back the cold ones `limitRehydration`
 * admits.
 */
export async function refreshPhase(
  night: NightStore,
  run: NightRun,
  policy: NightPolicy,
  progress: Progress = quiet,
): Promise<{ refreshed: number; rehydrated: number; queries: number }> {
  // Today's writes join the document frequencies before any phase reads by term.
  for await (const batch of night.pending('terms')) await night.countTerms(batch);
  const since = await night.previousRunAsOf();
  const logged = await night.queriesSince(since);
  const queries = new QueryIndex(logged.map((q) => q.terms));
  // Hot entries that went dormant on the days since the previous run leave default recall's
  // postings tonight, and those inside the refresh window are every hot entry a query may
  // raise (refreshEligible): one read by dormant day serves both.
  const dropFrom = dayOf(since ?? run.asOf - FIRST_NIGHT_LOOKBACK_DAYS * DAY_MS) * DAY_MS;
  const windowFrom = run.asOf - policy.refresh.refreshWindowMs;
  const dormant: Entry[] = [];
  const readFrom = queries.size > 0 ? Math.min(dropFrom, windowFrom) : dropFrom;
  for await (const entries of night.dormantBetween(readFrom, run.asOf)) dormant.push(...entries);
  const raised = new Set<string>();
  if (queries.size > 0) {
    const df = await night.documentFrequencies(logged.flatMap((q) => q.terms));
    const proposers = [
      ...new Set(logged.flatMap((q) => refreshProposers(q.terms, df, POSTINGS_BUDGET.deep))),
    ].sort();
    const returned = new Map<string, Located>();
    // Cold copies first: an entry in both tiers is mid-rehydration, and planning its cold
    // copy finishes that move. What a recall returned is a candidate whatever its terms.
    const returnedIds = [...new Set(logged.flatMap((q) => q.hitIds))].sort();
    for (const found of await night.copies(returnedIds)) {
      if (found.tier === 'cold' || !returned.has(found.entry._id)) returned.set(found.entry._id, found);
    }
    const candidates = new Map<string, Located>();
    for (const found of returned.values()) if (found.tier === 'cold') candidates.set(found.entry._id, found);
    const add = (entries: readonly Entry[], tier: Tier) => {
      for (const entry of entries) if (!candidates.has(entry._id)) candidates.set(entry._id, { entry, tier });
      progress({ terms: proposers.length, candidates: candidates.size });
    };
    for await (const entries of night.withTerms('cold', proposers, POSTINGS_BUDGET.deep))
      add(entries, 'cold');
    // The hot ones holding a proposer, as their postings would give them: read by dormant day
    // (a few days of the agent's entries) rather than by term (most of hot, once per term).
    const proposing = new Set(proposers);
    add(
      dormant.filter((e) => e.dormantAt >= windowFrom && e.terms.some((t) => proposing.has(t))),
      'hot',
    );
    for (const found of returned.values()) {
      if (!candidates.has(found.entry._id)) candidates.set(found.entry._id, found);
    }
    const found = [...candidates.values()].sort((a, b) => (a.entry._id < b.entry._id ? -1 : 1));
    const byMeaning = new Set(logged.flatMap((q) => q.meaningIds));
    const planned = planRefresh(found, queries, byMeaning, run.asOf, policy.refresh).map((s) => ({
      ...s,
      writtenAt: candidates.get(s.id)!.entry.writtenAt,
    }));
    const { hot } = await night.tierCounts();
    const wanted = wantedFromCold(logged, returned, run.asOf, policy.memory);
    const steps = limitRehydration(planned, wanted, hot ?? Infinity, policy.reclaim).map((s) => ({
      ...s,
      entry: candidates.get(s.id)!.entry,
    }));
    for (const step of steps) if (step.tier === 'hot') raised.add(step.id);
    for (let i = 0; i < steps.length; i += policy.batch) {
      await night.refresh(steps.slice(i, i + policy.batch));
      progress({ planned: steps.length, done: Math.min(steps.length, i + policy.batch) });
    }
  }
  // After the refreshes: what they raised is live again; the others leave at the version read.
  await night.dropLiveKeys(
    dormant.filter((e) => e.dormantAt >= dropFrom && e.liveKeys !== undefined && !raised.has(e._id)),
  );
  // Read above; everything past the retention goes now, however old its day: a recall may
  // have been logged at an `asOf` before any night looked.
  await night.dropQueries(dayOf(run.asOf) - policy.queryLogRetentionDays);
  return {
    refreshed: await night.counted('refresh'),
    rehydrated: await night.counted('rehydrate'),
    queries: queries.size,
  };
}

/** What the consolidate phase may still merge: clusterable and in no summary yet. */
function free(entry: Entry, asOf: number): boolean {
  return clusterable(entry, asOf) && !entry.subsumedBy?.length;
}

/** What the consolidate phase asks of models: a summary, and (when there are embeddings) neighbours by meaning. */
export interface ConsolidateModels {
  summarise: (sources: { id: string; text: string }[]) => Promise<string>;
  /** Per id with a vector, its `k` nearest entries of the agent at or above `minSimilarity`. */
  neighboursByMeaning?: (
    ids: readonly string[],
    k: number,
    minSimilarity: number,
  ) => Promise<MeaningNeighbours>;
}

/**
 * New entries are counted into the document frequencies, then each one new since the last
 * run is compared with its neighbours, found through its terms; near-duplicate clusters
 * become summaries. The sources stay, each marked `subsumedBy` with whether the summary
 * kept all of its facts. A retry first completes the summaries this run already wrote.
 */
export async function consolidatePhase(
  night: NightStore,
  run: NightRun,
  policy: NightPolicy,
  models: ConsolidateModels,
  progress: Progress = quiet,
): Promise<{ summarised: number; lossySummaries: number }> {
  const { summarise } = models;
  for (const summary of await night.summariesOfRun()) {
    // One retired since (a later night superseded a source) stays retired.
    if (!summary.isActive) continue;
    const { present } = await night.stored(summary.derivedFrom ?? []);
    await night.writeSummary(
      summary,
      present.map((s) => ({ id: s._id, text: s.text })),
    );
  }

  // Summaries written since the refresh phase counted the night's writes.
  for await (const batch of night.pending('terms')) await night.countTerms(batch);

  const seeds = await collect(night.pending('cluster'), progress);
  const items = new Map<string, Entry>();
  for (const { entry, tier } of seeds)
    if (tier === 'hot' && free(entry, run.asOf)) items.set(entry._id, entry);
  const seedTerms = [...new Set([...items.values()].flatMap((e) => e.terms))];
  const df = await night.documentFrequencies(seedTerms);
  const clusterTerms = seedTerms.filter((t) => (df.get(t) ?? 0) <= CLUSTER_MAX_POSTINGS).sort();
  for await (const entries of night.withTerms('hot', clusterTerms, CLUSTER_MAX_POSTINGS + 1)) {
    for (const entry of entries) {
      if (!items.has(entry._id) && free(entry, run.asOf)) items.set(entry._id, entry);
    }
  }
  // Neighbours by meaning join those the terms found: each free seed's nearest hot entries.
  let meaning: MeaningNeighbours = new Map();
  if (policy.cluster.meaningSimilarity !== undefined && models.neighboursByMeaning) {
    const seedIds = seeds.map((s) => s.entry._id).filter((id) => items.has(id));
    meaning = await models.neighboursByMeaning(
      seedIds,
      policy.cluster.neighbours,
      policy.cluster.meaningSimilarity,
    );
    const found = [...new Set([...meaning.values()].flat().map((n) => n.id))].filter((id) => !items.has(id));
    for (const { entry, tier } of await night.copies(found.sort())) {
      if (tier === 'hot' && free(entry, run.asOf)) items.set(entry._id, entry);
    }
  }
  const clusters = nearDuplicateClusters(
    [...items.values()].map((e) => ({ id: e._id, writtenAt: e.writtenAt, terms: e.terms })),
    policy.cluster,
    meaning,
  );
  let done = 0;
  for (const ids of clusters) {
    const { present: sources } = await night.stored(ids);
    if (sources.length < 2) continue;
    const texts = sources.map((s) => ({ id: s._id, text: s.text }));
    const text = await summarise(texts);
    const assessment = assessSummary(texts, text);
    const summary = buildSummaryEntry(night.summaryId(sources.map((s) => s._id)), sources, text, assessment, {
      asOf: run.asOf,
      runId: run.runId,
      policy: policy.memory,
    });
    await night.writeSummary(summary, texts);
    progress({ clusters: clusters.length, done: ++done });
  }
  await night.settle(
    seeds.map((s) => s.entry._id),
    'cluster',
  );
  const ours = await night.summariesOfRun();
  return {
    summarised: await night.counted('summarise'),
    lossySummaries: ours.filter((s) => s.lossy_summary === true).length,
  };
}

/** A fact superseded, and the fact that superseded it. */
export interface SupersededSource {
  sourceId: string;
  supersededBy: string;
}

/**
 * The supersessions the night must carry into the summaries: those it plans, and those an
 * earlier attempt of it already made (a superseded fact or its successor is among the
 * night's pending facts, which stay pending until the phase settles them), in id order.
 */
export function supersededTonight(
  facts: readonly Pick<Entry, '_id' | 'supersededBy'>[],
  steps: readonly SupersessionStep[],
  pendingIds: ReadonlySet<string>,
): SupersededSource[] {
  const successor = new Map<string, string>();
  for (const f of facts) if (f.supersededBy !== undefined) successor.set(f._id, f.supersededBy);
  for (const step of steps) successor.set(step.olderId, step.newerId);
  return [...successor]
    .filter(([older, newer]) => pendingIds.has(older) || pendingIds.has(newer))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([sourceId, supersededBy]) => ({ sourceId, supersededBy }));
}

/**
 * A newer dated fact about the same subject and attribute supersedes the older one. The
 * subjects with a new fact since the last run are checked, each with all of its facts. A
 * summary built from a superseded fact, on whatever night, is retired and its sources
 * released (docs/invariants.md, Current summaries): the current ones await clustering, so
 * tonight's consolidate phase, which runs next, summarises them again without the old value.
 */
export async function supersedePhase(
  night: NightStore,
  progress: Progress = quiet,
): Promise<{ superseded: number }> {
  const pending = await collect(night.pending('supersede'), progress);
  const subjects = [...new Set(pending.map((p) => p.entry.subject).filter((s) => s !== undefined))].sort();
  const facts = new Map<string, Entry>();
  for (const subject of subjects) {
    for (const { entry } of await night.factsAbout(subject))
      if (!facts.has(entry._id)) facts.set(entry._id, entry);
  }
  const steps = planSupersession([...facts.values()]);
  let done = 0;
  for (const step of steps) {
    await night.supersede(step);
    progress({ done: ++done });
  }
  const pendingIds = new Set(pending.map((p) => p.entry._id));
  const superseded = supersededTonight([...facts.values()], steps, pendingIds);
  // A fact reclaim deleted is superseded all the same once a newer one arrives: its
  // stand-in must stop asserting it.
  const current = [...facts.values()].map((f) =>
    steps.some((s) => s.olderId === f._id) ? { ...f, isActive: false } : f,
  );
  for (const subject of subjects) {
    const about = current.filter((f) => f.subject === subject);
    superseded.push(...supersededWhileEvicted(await night.evictedFactsAbout(subject), about));
  }
  for (const source of superseded) {
    for (const summary of await night.summariesOf(source.sourceId))
      await night.retireSummary(summary, source);
  }
  await night.settle(
    pending.map((p) => p.entry._id),
    'supersede',
  );
  return { superseded: await night.counted('supersede') };
}

/**
 * Above the high watermark, rank the hot entries by storage signals alone and spill or evict
 * them down to the low watermark (docs/nightly.md, Nightly reflective consolidation). The maintained hot
 * count says whether there is work without reading any entry; when there is, hot is read from
 * its oldest write day on until those days hold all that must leave (`oldestWritten`), else
 * every hot entry is read once (which also sets the count again); then the planned ones whole,
 * a batch at a time. The plan is recomputed on every attempt — hot's own contents are the cursor.
 */
const STAND_IN_GONE = 'dead, but its stand-in no longer stands in for it: spilled instead';

/**
 * Hot's entries from `from` that the hot count holds (not those awaiting it: moving one would
 * take from the count what it never held), a write day at a time, until they number `need` (at the end of a
 * day, so that every entry not read was written later than all that were), or undefined when
 * the days up to `asOf` do not hold that many: the full read decides then. `from` comes back as
 * the first day that held an entry.
 */
async function oldestWritten(
  night: NightStore,
  from: number,
  need: number,
  asOf: number,
  progress: Progress,
): Promise<{ entries: ReclaimEntry[]; from: number } | undefined> {
  const entries: ReclaimEntry[] = [];
  let first: number | undefined;
  for (let day = from; day <= dayOf(asOf) && entries.length < need; day++) {
    const written = await night.hotWrittenOn(day);
    if (written.length > 0) first ??= day;
    entries.push(...written.filter((e) => !awaitsCounting(e)));
    progress({ read: entries.length });
  }
  return entries.length >= need ? { entries, from: first ?? from } : undefined;
}

/** An eviction's stand-in, read now: it must exist and stand in for the entry (`standsIn`). */
async function standingIn(
  night: NightStore,
  entry: Entry,
  step: ReclaimStep,
  asOf: number,
): Promise<boolean> {
  if (!step.standIn) return false;
  const [summary] = (await night.stored([step.standIn.summaryId])).present;
  return summary !== undefined && standsIn(summary, entry, step.standIn.lossy, asOf);
}

export async function reclaimPhase(
  night: NightStore,
  run: NightRun,
  policy: NightPolicy,
  progress: Progress = quiet,
): Promise<{ spilled: number; evicted: number; hotBefore: number }> {
  const counts = await night.tierCounts();
  let hotBefore = counts.hot ?? 0;
  if (counts.hot === undefined || counts.hot > policy.reclaim.hotCapacity * policy.reclaim.highWatermark) {
    const need = reclaimTarget(counts.hot ?? 0, policy.reclaim);
    const oldest =
      // The amount comes from the maintained count: one in doubt is read again instead.
      counts.hot !== undefined && counts.hotWrittenFrom !== undefined && !counts.hotCountInDoubt
        ? await oldestWritten(night, counts.hotWrittenFrom, need, run.asOf, progress)
        : undefined;
    let plan: ReclaimStep[];
    if (oldest) {
      plan = planReclaimOf(oldest.entries, need, run.asOf, policy.reclaim);
      // Days before the first that held an entry are empty: the next night starts there.
      if (oldest.from !== counts.hotWrittenFrom)
        await night.setHotWrittenFrom(oldest.from, counts.hotWrittenFrom);
    } else {
      const hot = await collect(night.hotStorage(), progress);
      hotBefore = hot.length;
      // New writes count from the night that counts their terms (this one, or the next for
      // one written since it started); summaries from the night that writes them.
      const counted = hot.filter((e) => !awaitsCounting(e));
      await night.setHotCount(counted.length, counts.hotChanges);
      // Once every hot entry has its write day, the next nights read hot from the oldest.
      if (counts.hotWrittenFrom === undefined && (await night.keyWriteDays(hot))) {
        await night.setHotWrittenFrom(oldestWriteDay(hot, dayOf(run.asOf)), undefined);
      }
      plan = planReclaim(counted, run.asOf, policy.reclaim);
    }
    for (let i = 0; i < plan.length; i += policy.batch) {
      const steps = plan.slice(i, i + policy.batch);
      const { present } = await night.stored(steps.map((s) => s.id));
      const byId = new Map(present.map((e) => [e._id, e]));
      const spills: { step: ReclaimStep; entry: Entry }[] = [];
      for (const step of steps) {
        const entry = byId.get(step.id);
        if (!entry) continue;
        // Decided again from the document as it is now, which the delete is guarded on.
        const decided = reclaimStep(entry, step.rank, run.asOf, policy.reclaim);
        if (decided.action !== 'evict') spills.push({ step: decided, entry });
        else if (await standingIn(night, entry, decided, run.asOf)) await night.evict(entry, decided);
        else spills.push({ step: { ...decided, action: 'spill', why: STAND_IN_GONE }, entry });
      }
      await night.spill(spills);
      progress({ planned: plan.length, done: i + steps.length });
    }
  }
  return {
    spilled: await night.counted('spill'),
    evicted: await night.counted('evict'),
    hotBefore,
  };
}

/** What a phase of the pass is handed; each takes what it needs of it. */
export interface PassContext {
  night: NightStore;
  run: NightRun;
  policy: NightPolicy;
  models: ConsolidateModels;
  progress?: Progress;
}

/**
 * The phases of the pass by their names in the registry (core/nightly/registry.ts), each
 * returning its counts: the activities (activities/nightly.ts) and the simulation
 * (sim/model.ts) run them from here, in the registry's order.
 */
export const NIGHT_PASS = {
  expire: ({ night, run, progress }) => expirePhase(night, run, progress),
  refresh: ({ night, run, policy, progress }) => refreshPhase(night, run, policy, progress),
  supersede: ({ night, progress }) => supersedePhase(night, progress),
  consolidate: ({ night, run, policy, models, progress }) =>
    consolidatePhase(night, run, policy, models, progress),
  reclaim: ({ night, run, policy, progress }) => reclaimPhase(night, run, policy, progress),
} satisfies { [N in PassPhaseName]: (pass: PassContext) => Promise<Record<CountsOf<N>, number>> };
