import { assessSummary, buildSummaryEntry, clusterable, nearDuplicateClusters } from '../../core/clusters';
import type { Config } from '../../core/config';
import {
  buildEntry,
  memoryPolicy,
  parseWriteRequest,
  type Entry,
  type MemoryPolicy,
  type Tier,
} from '../../core/entry';
import {
  applyPatch,
  dueForExpiry,
  expirePatch,
  planRefresh,
  planSupersession,
  QueryIndex,
  refreshPatch,
  refreshPolicy,
  supersedePatch,
  supersedesPatch,
  type RefreshPolicy,
} from '../../core/lifecycle';
import { rankCandidates, type Candidate, type RecallHit } from '../../core/recall';
import { planReclaim, reclaimPolicy, type ReclaimPolicy } from '../../core/reclaim';
import { salienceAt } from '../../core/salience';
import { terms } from '../../core/text';
import { extractiveSummary } from '../../llm/summarizer';
import { entryId } from '../../store/entries';
import { summaryId } from '../../store/lifecycle';
import { consolidationRunId } from '../../workflows/consolidation';
import type { Role, WriteEvent } from './workload';

/**
 * An in-memory model of one agent's store and of the nightly pass over it. The memgate pass
 * makes the decisions of the consolidateAgent phases — the same `core/` planners, the same
 * candidate filters, the same order — so a run through the real stack must decide the same.
 * The baseline runs the same pass with reclaim replaced by the seed's salience-ranked
 * deletion, so the two differ only in how capacity is reclaimed.
 */

export type ReclaimMode = 'memgate' | 'salience-deletion';

export interface SimPolicy {
  memory: MemoryPolicy;
  refresh: RefreshPolicy;
  reclaim: ReclaimPolicy;
  cluster: { similarity: number; neighbours: number };
  limits: { maxTextChars: number; maxEntriesPerWrite: number };
}

export function simPolicy(config: Config): SimPolicy {
  return {
    memory: memoryPolicy(config),
    refresh: refreshPolicy(config),
    reclaim: reclaimPolicy(config),
    cluster: { similarity: config.clusterSimilarity, neighbours: config.clusterNeighbours },
    limits: { maxTextChars: config.maxTextChars, maxEntriesPerWrite: config.maxEntriesPerWrite },
  };
}

/** What one night decided, by entry id (supersessions as `older>newer`), each list sorted. */
export interface NightDecisions {
  asOf: number;
  expire: string[];
  refresh: string[];
  rehydrate: string[];
  summarise: string[];
  supersede: string[];
  spill: string[];
  evict: string[];
}

export const DECISION_KINDS = [
  'expire',
  'refresh',
  'rehydrate',
  'summarise',
  'supersede',
  'spill',
  'evict',
] as const;

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
}

export class SimStore {
  readonly hot = new Map<string, Entry>();
  readonly cold = new Map<string, Entry>();
  readonly tombstones = new Map<string, SimTombstone>();
  readonly evictions: Eviction[] = [];
  private readonly roles = new Map<string, Role>();
  /** Queries logged since the last nightly run (the refresh phase reads them). */
  private pendingQueries: string[][] = [];
  /** Entry and tombstone ids by subject term: recall candidates are found through it. */
  private readonly bySubject = new Map<string, Set<string>>();
  private readonly stonesBySubject = new Map<string, Set<string>>();
  private readonly subjectTerms: Set<string>;

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
    this.hot.set(entry._id, entry);
    for (const t of entry.terms) if (this.subjectTerms.has(t)) index(this.bySubject, t, entry._id);
    return true;
  }

  /** Logs a query; only the log changes (I7). */
  logQuery(text: string): void {
    this.pendingQueries.push(terms(text));
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
    this.logQuery(text);
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
        ? rankCandidates(text, candidates, { now: at, k, ...this.policy.memory })
        : candidates.map(({ entry }) => ({ id: entry._id, text: entry.text }));
    return { hits, missing: stones.size, candidates: candidates.length };
  }

  /** One nightly pass at `asOf`: expire → refresh → consolidate → supersede → reclaim. */
  night(asOf: number): NightDecisions {
    const d: NightDecisions = {
      asOf,
      expire: [],
      refresh: [],
      rehydrate: [],
      summarise: [],
      supersede: [],
      spill: [],
      evict: [],
    };
    this.expire(asOf, d);
    this.refresh(asOf, d);
    this.consolidate(asOf, d);
    this.supersede(d);
    if (this.mode === 'memgate') this.reclaim(asOf, d);
    else this.deleteLeastSalient(asOf, d);
    for (const k of DECISION_KINDS) d[k].sort();
    return d;
  }

  private tier(tier: Tier): Map<string, Entry> {
    return tier === 'hot' ? this.hot : this.cold;
  }

  private expire(asOf: number, d: NightDecisions): void {
    for (const tier of ['hot', 'cold'] as const) {
      for (const e of this.tier(tier).values()) {
        if (!dueForExpiry(e, asOf)) continue;
        this.patch(tier, e, expirePatch(asOf));
        d.expire.push(e._id);
      }
    }
  }

  private refresh(asOf: number, d: NightDecisions): void {
    const queries = new QueryIndex(this.pendingQueries);
    this.pendingQueries = [];
    if (queries.size === 0) return;
    const window = this.policy.refresh.refreshWindowMs;
    const hot = [...this.hot.values()].filter(
      (e) => e.isActive && e.dormantAt <= asOf && e.dormantAt >= asOf - window,
    );
    const cold = [...this.cold.values()].filter((e) => e.isActive);
    for (const [tier, entries] of [
      ['hot', hot],
      ['cold', cold],
    ] as const) {
      const steps = planRefresh(
        entries.map((entry) => ({ entry, tier })),
        queries,
        asOf,
        this.policy.refresh,
      );
      for (const step of steps) {
        const entry = this.tier(tier).get(step.id)!;
        const patch = refreshPatch(step, asOf);
        if (tier === 'hot') {
          this.patch('hot', entry, patch);
          d.refresh.push(step.id);
        } else {
          this.cold.delete(step.id);
          this.hot.set(step.id, {
            ...applyPatch(entry, { set: patch.set, unset: ['spilledAt'] }),
            version: entry.version + 1,
          });
          d.rehydrate.push(step.id);
        }
      }
    }
  }

  private consolidate(asOf: number, d: NightDecisions): void {
    const items: { id: string; writtenAt: number; terms: string[] }[] = [];
    for (const e of this.hot.values()) {
      const free = e.kind !== 'summary' && e.isActive && e.expiredAt === undefined && !e.subsumedBy?.length;
      if (free && clusterable(e, asOf)) items.push({ id: e._id, writtenAt: e.writtenAt, terms: e.terms });
    }
    const clusters = nearDuplicateClusters(items, this.policy.cluster);
    const runId = consolidationRunId(this.agentId, asOf);
    for (const ids of clusters) {
      const sources = ids
        .map((id) => this.hot.get(id)!)
        .sort((a, b) => a.writtenAt - b.writtenAt || (a._id < b._id ? -1 : 1));
      if (sources.length < 2) continue;
      const texts = sources.map((s) => ({ id: s._id, text: s.text }));
      const text = extractiveSummary(texts);
      const assessment = assessSummary(texts, text);
      const summary = buildSummaryEntry(
        summaryId(
          this.agentId,
          sources.map((s) => s._id),
        ),
        sources,
        text,
        assessment,
        { asOf, runId, policy: this.policy.memory },
      );
      this.insert(summary);
      d.summarise.push(summary._id);
      for (const [sourceId, lossless] of assessment.lossless) {
        const [tier, entry] = this.find(sourceId);
        if (!entry || entry.subsumedBy?.some((s) => s.summaryId === summary._id)) continue;
        this.patch(tier, entry, {
          set: { subsumedBy: [...(entry.subsumedBy ?? []), { summaryId: summary._id, lossless }] },
          unset: [],
        });
      }
    }
  }

  private supersede(d: NightDecisions): void {
    const facts = [...this.hot.values(), ...this.cold.values()].filter((e) => e.subject !== undefined);
    for (const step of planSupersession(facts)) {
      const [olderTier, older] = this.find(step.olderId);
      if (older && older.isActive && older.supersededBy === undefined)
        this.patch(olderTier, older, supersedePatch(step.newerId));
      const [newerTier, newer] = this.find(step.newerId);
      if (newer && newer.supersedes !== step.olderId)
        this.patch(newerTier, newer, supersedesPatch(step.olderId));
      d.supersede.push(`${step.olderId}>${step.newerId}`);
    }
  }

  /** memgate: rank by storage signals, spill, evict only what the two-key check proves dead. */
  private reclaim(asOf: number, d: NightDecisions): void {
    for (const step of planReclaim([...this.hot.values()], asOf, this.policy.reclaim)) {
      const entry = this.hot.get(step.id)!;
      if (step.action === 'spill') {
        this.hot.delete(step.id);
        this.cold.set(step.id, { ...entry, spilledAt: asOf });
        d.spill.push(step.id);
      } else {
        this.remove(entry, asOf, true);
        d.evict.push(step.id);
      }
    }
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
    const subjectTerms = entry.terms.filter((t) => this.subjectTerms.has(t));
    for (const t of subjectTerms) this.bySubject.get(t)?.delete(entry._id);
    if (tombstone) {
      this.tombstones.set(entry._id, { id: entry._id, terms: entry.terms });
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

  private patch(tier: Tier, entry: Entry, patch: Parameters<typeof applyPatch>[1]): void {
    this.tier(tier).set(entry._id, { ...applyPatch(entry, patch), version: entry.version + 1 });
  }
}

function index(map: Map<string, Set<string>>, key: string, id: string): void {
  const set = map.get(key);
  if (set) set.add(id);
  else map.set(key, new Set([id]));
}
