import {
  assessSummary,
  claimPatch,
  reinstatePatch,
  releasePatch,
  retirePatch,
} from '../core/nightly/clusters';
import type { Config } from '../core/config';
import {
  buildEntry,
  lastWriteDay,
  memoryPolicy,
  parseWriteRequest,
  type Entry,
  type PendingWork,
  type Tier,
} from '../core/entry';
import {
  applyPatch,
  combinePatches,
  expirePatch,
  refreshPatch,
  refreshPolicy,
  settlePatch,
  supersedePatch,
  supersedesPatch,
  type EntryPatch,
} from '../core/nightly/plans';
import {
  NIGHT_PASS,
  type Located,
  type PassContext,
  type NightPolicy,
  type NightRun,
  type NightStore,
} from '../core/nightly/phases';
import { rankCandidates, type Candidate, type RecallHit } from '../core/recall';
import { reclaimPolicy } from '../core/nightly/reclaim';
import { DECISIONS, PASS_PHASES, type Decision } from '../core/nightly/registry';
import { salienceAt } from '../core/salience';
import { terms } from '../core/text';
import { extractiveSummary } from '../llm/summariser';
import { consolidationRunId, entryId, summaryId } from '../core/ids';
import type { Role, WriteEvent } from './workload';

/**
 * An in-memory model of one agent's store. Its nightly pass is the one the consolidateAgent
 * workflow runs (core/nightly/phases.ts), over an in-memory `NightStore`, so a run through the real
 * stack must decide the same. The baseline runs the same pass with reclaim replaced by the
 * seed's salience-ranked deletion, so the two differ only in how capacity is reclaimed.
 */

export type ReclaimMode = 'memgate' | 'salience-deletion';

export interface SimPolicy extends NightPolicy {
  limits: { maxTextChars: number; maxEntriesPerWrite: number };
}

export function simPolicy(config: Config): SimPolicy {
  return {
    memory: memoryPolicy(config),
    refresh: refreshPolicy(config),
    reclaim: reclaimPolicy(config),
    cluster: { similarity: config.clusterSimilarity, neighbours: config.clusterNeighbours },
    batch: config.nightlyBatch,
    queryLogRetentionDays: config.queryLogRetentionDays,
    limits: { maxTextChars: config.maxTextChars, maxEntriesPerWrite: config.maxEntriesPerWrite },
  };
}

/** What one night decided, by entry id (supersessions as `older>newer`), each list sorted. */
export type NightDecisions = { asOf: number } & Record<Decision, string[]>;

/** A night that has decided nothing yet. */
export function noDecisions(asOf: number): NightDecisions {
  return {
    asOf,
    ...(Object.fromEntries(DECISIONS.map((k) => [k, [] as string[]])) as Record<Decision, string[]>),
  };
}

export interface Eviction {
  id: string;
  /** What the workload wrote it as (or `summary`, from consolidation). */
  role: Role | 'summary';
  at: number;
  /** Below the gate when it was deleted. */
  gated: boolean;
  terms: string[];
}

interface SimTombstone {
  id: string;
  terms: string[];
  /** An evicted fact's keys, as the store's tombstone keeps them. */
  fact?: { subject: string; attribute: string; writtenAt: number };
}

export class SimStore {
  readonly hot = new Map<string, Entry>();
  readonly cold = new Map<string, Entry>();
  readonly tombstones = new Map<string, SimTombstone>();
  readonly evictions: Eviction[] = [];
  private readonly roles = new Map<string, Role>();
  /** Queries logged since the last nightly run (the refresh phase reads them). */
  private loggedQueries: { at: number; terms: string[]; hitIds: string[] }[] = [];
  private lastNight: number | undefined;
  /** As the store keeps it (store/db.ts, AgentRecord): the first night's reclaim sets it. */
  private hotWrittenFrom: number | undefined;
  /** Entry and tombstone ids by subject term: recall candidates are found through it. */
  private readonly bySubject = new Map<string, Set<string>>();
  private readonly stonesBySubject = new Map<string, Set<string>>();
  private readonly subjectTerms: Set<string>;
  /** The indexes the nightly phases read through, as the MongoDB store's are. */
  private readonly byTerm = new Map<string, Set<string>>();
  private readonly byFactSubject = new Map<string, Set<string>>();
  /** Summaries by the ids of their sources. */
  private readonly bySource = new Map<string, Set<string>>();
  private readonly byPending = new Map<PendingWork, Set<string>>();
  private readonly df = new Map<string, number>();

  constructor(
    readonly agentId: string,
    readonly policy: SimPolicy,
    readonly mode: ReclaimMode,
    subjectNames: readonly string[],
  ) {
    this.subjectTerms = new Set(subjectNames.flatMap((n) => terms(n)));
  }

  /** The write activity's document for a write event: same schema defaults, same id. */
  write(event: WriteEvent): Entry {
    const { entries } = parseWriteRequest(
      { agentId: this.agentId, entries: [event.entry] },
      this.policy.limits,
      event.at,
    );
    const input = entries[0]!;
    const id = entryId(this.agentId, { idempotencyKey: event.entry.idempotencyKey });
    const entry = buildEntry(
      id,
      this.agentId,
      { ...input, writtenAt: event.entry.writtenAt },
      this.policy.memory,
    );
    this.insert(entry);
    this.roles.set(id, event.role);
    return entry;
  }

  private insert(entry: Entry): boolean {
    if (this.hot.has(entry._id) || this.cold.has(entry._id)) return false;
    this.put('hot', entry);
    for (const t of entry.terms) {
      index(this.byTerm, t, entry._id);
      if (this.subjectTerms.has(t)) index(this.bySubject, t, entry._id);
    }
    if (entry.subject !== undefined) index(this.byFactSubject, entry.subject, entry._id);
    for (const source of entry.derivedFrom ?? []) index(this.bySource, source, entry._id);
    return true;
  }

  /** Stores a copy and keeps the pending index in step with it. */
  private put(tier: Tier, entry: Entry): void {
    const other = this.tier(tier === 'hot' ? 'cold' : 'hot').get(entry._id);
    this.tier(tier).set(entry._id, entry);
    for (const [work, ids] of this.byPending) {
      if (!entry.pending?.includes(work) && !other?.pending?.includes(work)) ids.delete(entry._id);
    }
    for (const work of entry.pending ?? []) {
      let ids = this.byPending.get(work);
      if (!ids) this.byPending.set(work, (ids = new Set()));
      ids.add(entry._id);
    }
  }

  /** Logs a query and what it returned; only the log changes (docs/invariants.md, Read-only recall). */
  logQuery(text: string, at: number, hitIds: string[] = []): void {
    this.loggedQueries.push({ at, terms: terms(text), hitIds });
  }

  /**
   * Deep recall of a one-subject query: hot (dormant included) and cold candidates ranked by
   * the core ranker, and `missing`: tombstones sharing the query's term.
   */
  deepRecall(
    text: string,
    at: number,
    k: number,
  ): { hits: Pick<RecallHit, 'id' | 'text'>[]; missing: number; candidates: number } {
    const queryTerms = terms(text);
    const hot: Candidate[] = [];
    const cold: Candidate[] = [];
    const stones = new Set<string>();
    const seen = new Set<string>();
    for (const t of queryTerms) {
      for (const id of this.bySubject.get(t) ?? []) {
        if (seen.has(id)) continue;
        seen.add(id);
        const h = this.hot.get(id);
        if (h) hot.push({ entry: h, tier: 'hot' });
        else {
          const c = this.cold.get(id);
          if (c) cold.push({ entry: c, tier: 'cold' });
        }
      }
      for (const id of this.stonesBySubject.get(t) ?? []) stones.add(id);
    }
    const candidates = [...hot, ...cold];
    // Every candidate holds a query term and some salience, so with room for all of them deep
    // recall returns all of them; only their order would differ, and the reader ignores order.
    const hits =
      candidates.length > k
        ? rankCandidates(queryTerms, candidates, { now: at, k, ...this.policy.memory })
        : candidates.map(({ entry }) => ({ id: entry._id, text: entry.text }));
    this.logQuery(
      text,
      at,
      hits.map((h) => h.id),
    );
    return { hits, missing: stones.size, candidates: candidates.length };
  }

  /** One nightly pass at `asOf`: the phases of the pass, in the registry's order. */
  async night(asOf: number): Promise<NightDecisions> {
    const d = noDecisions(asOf);
    const run: NightRun = { agentId: this.agentId, asOf, runId: consolidationRunId(this.agentId, asOf) };
    const pass: PassContext = {
      night: this.nightStore(run, d),
      run,
      policy: this.policy,
      models: { summarise: async (texts) => extractiveSummary(texts) },
    };
    for (const name of PASS_PHASES) {
      // The baseline reclaims by the seed's salience-ranked deletion instead.
      if (name === 'reclaim' && this.mode === 'salience-deletion') this.deleteLeastSalient(asOf, d);
      else await NIGHT_PASS[name](pass);
    }
    this.lastNight = asOf;
    this.loggedQueries = this.loggedQueries.filter((q) => q.at > asOf);
    for (const k of DECISIONS) d[k].sort();
    return d;
  }

  /** What a store holds after the nights run so far, to load into a real store (bench/consolidation). */
  snapshot() {
    return {
      df: new Map(this.df),
      queries: [...this.loggedQueries],
      lastNight: this.lastNight,
      hotWrittenFrom: this.hotWrittenFrom,
    };
  }

  private tier(tier: Tier): Map<string, Entry> {
    return tier === 'hot' ? this.hot : this.cold;
  }

  /** The store the nightly phases see: every write of theirs is one decision of the night. */
  private nightStore(run: NightRun, d: NightDecisions): NightStore {
    const summaries: string[] = [];
    const located = (id: string): Located | undefined => {
      const [tier, entry] = this.find(id);
      return entry ? { entry, tier } : undefined;
    };
    const size = this.policy.batch;
    const batches = <T>(items: T[]): AsyncIterable<T[]> =>
      (async function* () {
        for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
      })();
    return {
      pending: (work) =>
        batches(
          [...(this.byPending.get(work) ?? [])]
            .sort()
            .map(located)
            .filter((l): l is Located => l !== undefined && (l.entry.pending ?? []).includes(work)),
        ),
      withTerms: (tier, terms, limit) => {
        const postings = terms.map((term) =>
          [...(this.byTerm.get(term) ?? [])]
            .map((id) => this.tier(tier).get(id))
            .filter((e): e is Entry => e !== undefined)
            .slice(0, limit),
        );
        return (async function* () {
          yield* postings;
        })();
      },
      dormantBetween: (from, to) =>
        batches([...this.hot.values()].filter((e) => e.dormantAt >= from && e.dormantAt <= to)),
      evictedFactsAbout: async (subject) =>
        [...this.tombstones.values()].flatMap((t) =>
          t.fact?.subject === subject
            ? [{ id: t.id, attribute: t.fact.attribute, writtenAt: t.fact.writtenAt }]
            : [],
        ),
      factsAbout: async (subject) =>
        [...(this.byFactSubject.get(subject) ?? [])]
          .map(located)
          .filter((l): l is Located => l !== undefined),
      documentFrequencies: async (list) => new Map(list.map((t) => [t, this.df.get(t) ?? 0])),
      countTerms: async (found) => {
        for (const { entry: e, tier } of found) {
          this.settle(e._id, 'terms');
          for (const t of e.terms) this.df.set(t, (this.df.get(t) ?? 0) + 1);
          if (tier === 'hot' && this.hotWrittenFrom !== undefined)
            this.hotWrittenFrom = Math.min(this.hotWrittenFrom, lastWriteDay(e));
        }
      },
      settle: async (ids, work) => {
        for (const id of ids) this.settle(id, work);
      },
      queriesSince: async (since) =>
        this.loggedQueries
          .filter((q) => q.at <= run.asOf && (since === undefined || q.at > since))
          .map(({ terms, hitIds }) => ({ terms, hitIds, meaningIds: [] })),
      previousRunAsOf: async () => this.lastNight,
      tierCounts: async () => ({
        hot: this.hot.size,
        cold: this.cold.size,
        ...(this.hotWrittenFrom !== undefined && { hotWrittenFrom: this.hotWrittenFrom }),
      }),
      hotStorage: () => batches([...this.hot.values()].sort((a, b) => (a._id < b._id ? -1 : 1))),
      hotWrittenOn: async (day) => [...this.hot.values()].filter((e) => lastWriteDay(e) === day),
      setHotCount: async () => undefined,
      // The simulation's entries need no key: it finds them by their write times.
      keyWriteDays: async () => true,
      setHotWrittenFrom: async (day, was) => {
        if (this.hotWrittenFrom === was) this.hotWrittenFrom = day;
      },
      copies: async (ids) =>
        ids.flatMap((id) =>
          (['hot', 'cold'] as const).flatMap((tier) => {
            const entry = this.tier(tier).get(id);
            return entry ? [{ entry, tier }] : [];
          }),
        ),
      stored: async (ids) => {
        const present: Entry[] = [];
        const gone: string[] = [];
        for (const id of ids) {
          const found = located(id);
          if (found) present.push(found.entry);
          else gone.push(id);
        }
        present.sort((a, b) => a.writtenAt - b.writtenAt || (a._id < b._id ? -1 : 1));
        return { present, gone };
      },
      summaryId: (sourceIds) => summaryId(this.agentId, sourceIds),
      summariesOfRun: async () => summaries.map(located).flatMap((l) => (l ? [l.entry] : [])),
      expire: async ({ entry, tier }) => {
        this.patch(tier, entry, combinePatches(expirePatch(run.asOf), settlePatch(entry, 'expire')));
        d.expire.push(entry._id);
      },
      refresh: async (steps) => {
        for (const step of steps) {
          const entry = this.tier(step.tier).get(step.id)!;
          const patch = refreshPatch(step, run.asOf);
          if (step.tier === 'hot') {
            this.patch('hot', entry, patch);
            d.refresh.push(step.id);
          } else {
            this.cold.delete(step.id);
            this.put('hot', {
              ...applyPatch(entry, { set: patch.set, unset: ['spilledAt'] }),
              version: entry.version + 1,
            });
            d.rehydrate.push(step.id);
          }
        }
      },
      // The simulation's recall reads its own indexes, not posting keys.
      dropLiveKeys: async () => undefined,
      // The simulation keeps only the queries since its last night anyway.
      dropQueries: async () => undefined,
      summariesOf: async (sourceId) =>
        [...(this.bySource.get(sourceId) ?? [])].map(located).flatMap((l) => (l ? [l.entry] : [])),
      writeSummary: async (summary, sources) => {
        const inserted = this.insert(summary);
        const [tier, stored] = this.find(summary._id);
        if (!stored) return;
        const reinstated = this.patchIf(tier, stored, reinstatePatch(stored));
        if (inserted || reinstated) {
          summaries.push(summary._id);
          d.summarise.push(summary._id);
        }
        const derived = new Set(stored.derivedFrom);
        const { lossless } = assessSummary(
          sources.filter((s) => derived.has(s.id)),
          stored.text,
        );
        for (const [sourceId, ok] of lossless) {
          const [sourceTier, source] = this.find(sourceId);
          if (source) this.patchIf(sourceTier, source, claimPatch(source, stored._id, ok, { link: true }));
        }
      },
      retireSummary: async (summary) => {
        const [tier, stored] = this.find(summary._id);
        if (stored) this.patchIf(tier, stored, retirePatch(stored));
        for (const sourceId of summary.derivedFrom ?? []) {
          const [sourceTier, source] = this.find(sourceId);
          if (source) this.patchIf(sourceTier, source, releasePatch(source, summary._id));
        }
      },
      supersede: async (step) => {
        const [olderTier, older] = this.find(step.olderId);
        if (older && older.isActive && older.supersededBy === undefined)
          this.patch(olderTier, older, supersedePatch(step.newerId));
        const [newerTier, newer] = this.find(step.newerId);
        if (newer && newer.supersedes !== step.olderId)
          this.patch(newerTier, newer, supersedesPatch(step.olderId));
        d.supersede.push(`${step.olderId}>${step.newerId}`);
      },
      spill: async (batch) => {
        for (const { step, entry } of batch) {
          this.hot.delete(step.id);
          this.put('cold', { ...entry, spilledAt: run.asOf });
          d.spill.push(step.id);
        }
      },
      evict: async (entry, step) => {
        this.remove(entry, run.asOf, true);
        d.evict.push(step.id);
        return true;
      },
      counted: async (event) => d[event as Decision].length,
    };
  }

  private settle(id: string, work: PendingWork): void {
    const [tier, entry] = this.find(id);
    if (entry?.pending?.includes(work)) this.patch(tier, entry, settlePatch(entry, work));
  }

  /** The seed: over capacity, delete the least salient entries now, no spill, no tombstone. */
  private deleteLeastSalient(asOf: number, d: NightDecisions): void {
    const over = this.hot.size - this.policy.reclaim.hotCapacity;
    if (over <= 0) return;
    const halfLife = this.policy.memory.halfLifeMs;
    const ranked = [...this.hot.values()]
      .map((e) => ({ e, s: salienceAt(e.salience, asOf, halfLife) }))
      .sort((a, b) => a.s - b.s || (a.e._id < b.e._id ? -1 : 1));
    for (const { e } of ranked.slice(0, over)) {
      this.remove(e, asOf, false);
      d.evict.push(e._id);
    }
  }

  private remove(entry: Entry, asOf: number, tombstone: boolean): void {
    this.hot.delete(entry._id);
    this.cold.delete(entry._id);
    for (const ids of this.byPending.values()) ids.delete(entry._id);
    for (const t of entry.terms) {
      this.byTerm.get(t)?.delete(entry._id);
      if (!entry.pending?.includes('terms')) this.df.set(t, (this.df.get(t) ?? 1) - 1);
    }
    if (entry.subject !== undefined) this.byFactSubject.get(entry.subject)?.delete(entry._id);
    const subjectTerms = entry.terms.filter((t) => this.subjectTerms.has(t));
    for (const t of subjectTerms) this.bySubject.get(t)?.delete(entry._id);
    if (tombstone) {
      this.tombstones.set(entry._id, {
        id: entry._id,
        terms: entry.terms,
        ...(entry.subject !== undefined && entry.attribute !== undefined
          ? { fact: { subject: entry.subject, attribute: entry.attribute, writtenAt: entry.writtenAt } }
          : {}),
      });
      for (const t of subjectTerms) index(this.stonesBySubject, t, entry._id);
    }
    this.evictions.push({
      id: entry._id,
      role: this.roles.get(entry._id) ?? 'summary',
      at: asOf,
      gated: entry.dormantAt <= asOf,
      terms: entry.terms,
    });
  }

  private find(id: string): [Tier, Entry | undefined] {
    const hot = this.hot.get(id);
    return hot ? ['hot', hot] : ['cold', this.cold.get(id)];
  }

  private patch(tier: Tier, entry: Entry, patch: EntryPatch): void {
    this.put(tier, { ...applyPatch(entry, patch), version: entry.version + 1 });
  }

  /** Applies a patch that may be undefined (the change is there already); whether it did. */
  private patchIf(tier: Tier, entry: Entry, patch: EntryPatch | undefined): boolean {
    if (patch) this.patch(tier, entry, patch);
    return patch !== undefined;
  }
}

function index(map: Map<string, Set<string>>, key: string, id: string): void {
  const set = map.get(key);
  if (set) set.add(id);
  else map.set(key, new Set([id]));
}
