import { atoms, checkLossless } from '../atoms';
import { initialPending, isExpired, type Entry, type MemoryPolicy } from '../entry';
import { awaitPatch, combinePatches, restorePatch, type EntryPatch } from './plans';
import { dormantAt, salienceAt } from '../salience';
import { countTerms, countTokens } from '../text';

/**
 * Near-duplicate clustering for the consolidate phase: lexical similarity (cosine over
 * distinct terms), and when the policy asks for it similarity of meaning (cosine of the
 * entries' embeddings); per entry, its top-K most similar neighbours above a threshold.
 * What a summary keeps is still decided by the atom check alone: similarity only proposes.
 */

export interface ClusterItem {
  id: string;
  writtenAt: number;
  terms: readonly string[];
}

export interface ClusterOptions {
  /** Cosine similarity of term sets at or above which two entries are near-duplicates. */
  similarity: number;
  /** Neighbours considered per entry; a cluster holds at most K + 1 entries. */
  neighbours: number;
  /** Cosine similarity of embeddings at or above which two entries are near-duplicates; unset, meaning is not used. */
  meaningSimilarity?: number;
}

/** An entry's nearest neighbours by embedding, as a vector index found them. */
export type MeaningNeighbours = ReadonlyMap<string, readonly { id: string; similarity: number }[]>;

/**
 * Terms in more entries than this do not propose neighbours (they still count in the
 * similarity): near-duplicates share their distinctive terms, and skipping the common
 * ones keeps candidate generation near-linear on big stores.
 */
export const CLUSTER_MAX_POSTINGS = 64;

export function termSimilarity(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 || b.size === 0) return 0;
  let shared = 0;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const t of small) if (large.has(t)) shared++;
  return shared / Math.sqrt(a.size * b.size);
}

/**
 * Clusters in a deterministic order: entries are taken oldest first, and each one not yet
 * in a cluster seeds one with its free top-K neighbours. Singletons are not returned.
 *
 * A neighbour qualifies by either similarity reaching its threshold; neighbours are ranked
 * by how far past its threshold the better of the two is, as a share of the way to 1, so the
 * two scales (term sets overlap less than embeddings agree) rank on one. Without `meaning`
 * (or `meaningSimilarity`) the clusters are exactly the lexical ones.
 */
export function nearDuplicateClusters(
  items: readonly ClusterItem[],
  opts: ClusterOptions,
  meaning: MeaningNeighbours = new Map(),
): string[][] {
  const ordered = [...items].sort((a, b) => a.writtenAt - b.writtenAt || (a.id < b.id ? -1 : 1));
  const sets = ordered.map((i) => new Set(i.terms));
  const postings = new Map<string, number[]>();
  sets.forEach((set, index) => {
    for (const t of set) {
      const list = postings.get(t);
      if (list) list.push(index);
      else postings.set(t, [index]);
    }
  });
  const byMeaning = meaningAdjacency(ordered, opts.meaningSimilarity === undefined ? new Map() : meaning);
  const past = (sim: number, threshold: number) =>
    sim >= threshold ? (sim - threshold) / (1 - threshold) : -1;
  const assigned = new Uint8Array(ordered.length);
  const clusters: string[][] = [];
  for (let i = 0; i < ordered.length; i++) {
    if (assigned[i]) continue;
    const candidates = new Set<number>();
    for (const t of sets[i]!) {
      const list = postings.get(t)!;
      if (list.length > CLUSTER_MAX_POSTINGS) continue;
      for (const j of list) if (j !== i && !assigned[j]) candidates.add(j);
    }
    const similarByMeaning = byMeaning[i];
    for (const j of similarByMeaning?.keys() ?? []) if (!assigned[j]) candidates.add(j);
    const neighbours = [...candidates]
      .map((j) => ({
        j,
        strength: Math.max(
          past(termSimilarity(sets[i]!, sets[j]!), opts.similarity),
          past(similarByMeaning?.get(j) ?? 0, opts.meaningSimilarity ?? Number.POSITIVE_INFINITY),
        ),
      }))
      .filter((n) => n.strength >= 0)
      .sort((a, b) => b.strength - a.strength || a.j - b.j)
      .slice(0, opts.neighbours);
    if (neighbours.length === 0) continue;
    const members = [i, ...neighbours.map((n) => n.j)].sort((a, b) => a - b);
    for (const m of members) assigned[m] = 1;
    clusters.push(members.map((m) => ordered[m]!.id));
  }
  return clusters;
}

/** Per item, the other items it is similar to by meaning, either way round (cosine is symmetric). */
function meaningAdjacency(
  ordered: readonly ClusterItem[],
  meaning: MeaningNeighbours,
): Map<number, number>[] {
  const index = new Map(ordered.map((item, i) => [item.id, i]));
  const adjacency = ordered.map(() => new Map<number, number>());
  for (const [id, neighbours] of meaning) {
    const i = index.get(id);
    if (i === undefined) continue;
    for (const n of neighbours) {
      const j = index.get(n.id);
      if (j === undefined || j === i) continue;
      const sim = Math.max(n.similarity, adjacency[i]!.get(j) ?? Number.NEGATIVE_INFINITY);
      adjacency[i]!.set(j, sim);
      adjacency[j]!.set(i, sim);
    }
  }
  return adjacency;
}

/**
 * What the consolidate phase may merge: active, unexpired, durable, non-summary entries.
 * A volatile fact is never summarised: it lapses, and is renewed, as one entry (expire,
 * `memgate restore --fresh-until`), which a summary merging it cannot follow. A summary
 * valid as long as it is would take its durable co-sources out of default recall when it
 * lapses, after they may have been evicted with the summary standing in for them; one valid
 * longer would assert its value after it lapsed (docs/invariants.md, Current summaries).
 */
export function clusterable(
  entry: Pick<Entry, 'kind' | 'isActive' | 'validity' | 'expiredAt'>,
  asOf: number,
): boolean {
  return (
    entry.kind !== 'summary' &&
    entry.isActive &&
    !entry.validity.volatile &&
    entry.expiredAt === undefined &&
    !isExpired(entry, asOf)
  );
}

export interface SummaryAssessment {
  /**
   * True unless every source's atoms survive in the summary
   * (docs/invariants.md, Lossy unless proven).
   */
  lossy: boolean;
  /** Each missing atom, as `<source id>: <atom>`. */
  lossyReasons: string[];
  /** Per source: whether the summary keeps all of its facts (key B of the two-key check). */
  lossless: Map<string, boolean>;
}

/** The atom check (core/atoms.ts) applied to a summary and each of its sources. */
export function assessSummary(
  sources: readonly { id: string; text: string }[],
  summaryText: string,
): SummaryAssessment {
  const lossless = new Map<string, boolean>();
  const lossyReasons: string[] = [];
  for (const s of sources) {
    const report = checkLossless(s.text, summaryText);
    lossless.set(s.id, report.lossless);
    for (const m of report.missing) lossyReasons.push(`${s.id}: ${m}`);
  }
  return { lossy: [...lossless.values()].some((ok) => !ok), lossyReasons, lossless };
}

/**
 * The summary entry for a cluster. It is as salient as its most salient source is now,
 * as confident as its least confident one, and it names its sources (`derivedFrom`) and the
 * run that wrote it (`source.ref`). Consolidation merges only durable entries (`clusterable`),
 * so its summaries are durable; rebuilt by an erasure from the sources of a summary written
 * before that rule, it is as fresh as its least fresh source, so it never asserts a lapsed value.
 */
export function buildSummaryEntry(
  id: string,
  sources: readonly Entry[],
  text: string,
  assessment: SummaryAssessment,
  ctx: { asOf: number; runId: string; policy: MemoryPolicy },
): Entry {
  const { asOf, policy } = ctx;
  const base = Math.min(1, Math.max(...sources.map((s) => salienceAt(s.salience, asOf, policy.halfLifeMs))));
  const salience = { base, at: asOf };
  const freshUntil = sources
    .map((s) => s.validity.freshUntil)
    .filter((f): f is number => f !== undefined)
    .reduce<number | undefined>((min, f) => (min === undefined ? f : Math.min(min, f)), undefined);
  const entry: Entry = {
    _id: id,
    agentId: sources[0]!.agentId,
    kind: 'summary',
    text,
    tokens: countTokens(text),
    ...countTerms(text),
    atoms: atoms(text),
    source: { origin: 'consolidation', ref: ctx.runId },
    writtenAt: asOf,
    salience,
    dormantAt: dormantAt(salience, policy.halfLifeMs, policy.gateThreshold),
    confidence: Math.min(...sources.map((s) => s.confidence)),
    verified: false,
    corroborations: [],
    validity:
      freshUntil === undefined
        ? { volatile: sources.some((s) => s.validity.volatile) }
        : { volatile: true, freshUntil },
    isActive: true,
    derivedFrom: sources.map((s) => s._id),
    lossy_summary: assessment.lossy,
    version: 1,
  };
  if (assessment.lossy) entry.lossyReasons = assessment.lossyReasons;
  entry.pending = initialPending(entry);
  return entry;
}

// Links between a summary and its sources -------------------------------------------------

/**
 * The source's link to a summary says `lossless` (key B of the two-key check): added when
 * `link` and missing, else changed only where it is there; undefined when it already says so.
 */
export function claimPatch(
  source: Pick<Entry, 'subsumedBy'>,
  summaryId: string,
  lossless: boolean,
  opts: { link: boolean },
): EntryPatch | undefined {
  const links = source.subsumedBy ?? [];
  const current = links.find((l) => l.summaryId === summaryId);
  if (current ? current.lossless === lossless : !opts.link) return undefined;
  const subsumedBy = current
    ? links.map((l) => (l.summaryId === summaryId ? { summaryId, lossless } : l))
    : [...links, { summaryId, lossless }];
  return { set: { subsumedBy }, unset: [] };
}

/**
 * A source leaves a summary that no longer stands for it (retired, or removed by an
 * erasure): its link goes, so no eviction relies on that summary, and a current source
 * awaits clustering again, so the next consolidate phase may summarise it anew.
 * Undefined once the link is gone, so a rerun changes nothing.
 */
export function releasePatch(
  source: Pick<Entry, 'kind' | 'isActive' | 'subsumedBy' | 'pending'>,
  summaryId: string,
): EntryPatch | undefined {
  const links = source.subsumedBy ?? [];
  if (!links.some((l) => l.summaryId === summaryId)) return undefined;
  const rest = links.filter((l) => l.summaryId !== summaryId);
  const unlink: EntryPatch = rest.length
    ? { set: { subsumedBy: rest }, unset: [] }
    : { set: {}, unset: ['subsumedBy'] };
  const current = source.kind !== 'summary' && source.isActive;
  return current ? combinePatches(unlink, awaitPatch(source, 'cluster')) : unlink;
}

/**
 * A summary one of whose sources was superseded leaves default recall (and can stand in for
 * nothing: `standsIn` takes only active summaries). It is kept, for deep recall and because
 * an entry evicted before may have it as its only stand-in; undefined when already retired.
 */
export function retirePatch(summary: Pick<Entry, 'isActive'>): EntryPatch | undefined {
  return summary.isActive ? { set: { isActive: false }, unset: [] } : undefined;
}

/** A retired summary whose sources are all current again (clustered anew) is active again. */
export function reinstatePatch(summary: Pick<Entry, 'isActive'>): EntryPatch | undefined {
  return summary.isActive ? undefined : { set: { isActive: true }, unset: [] };
}

/**
 * A superseded entry current again: active, protected from facts written before `at`, and,
 * unless it is a summary, awaiting clustering, so a night may summarise it again (a summary
 * it was in was retired when it was superseded, and stays so: its other sources were
 * summarised anew).
 */
export function restoreSupersessionPatch(entry: Pick<Entry, 'kind' | 'pending'>, at: number): EntryPatch {
  return entry.kind === 'summary'
    ? restorePatch(at)
    : combinePatches(restorePatch(at), awaitPatch(entry, 'cluster'));
}
