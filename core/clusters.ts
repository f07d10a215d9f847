import { atoms, checkLossless } from './atoms';
import { initialPending, isExpired, type Entry, type MemoryPolicy } from './entry';
import { dormantAt, salienceAt } from './salience';
import { countTokens, terms } from './text';

/**
 * Near-duplicate clustering for the consolidate phase: lexical similarity (cosine over
 * distinct terms) and, per entry, its top-K most similar neighbours above a threshold.
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
}

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
 */
export function nearDuplicateClusters(items: readonly ClusterItem[], opts: ClusterOptions): string[][] {
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
    const neighbours = [...candidates]
      .map((j) => ({ j, sim: termSimilarity(sets[i]!, sets[j]!) }))
      .filter((n) => n.sim >= opts.similarity)
      .sort((a, b) => b.sim - a.sim || a.j - b.j)
      .slice(0, opts.neighbours);
    if (neighbours.length === 0) continue;
    const members = [i, ...neighbours.map((n) => n.j)].sort((a, b) => a - b);
    for (const m of members) assigned[m] = 1;
    clusters.push(members.map((m) => ordered[m]!.id));
  }
  return clusters;
}

/** What the consolidate phase may merge: active, unexpired, non-summary entries. */
export function clusterable(
  entry: Pick<Entry, 'kind' | 'isActive' | 'validity' | 'expiredAt'>,
  asOf: number,
): boolean {
  return (
    entry.kind !== 'summary' && entry.isActive && entry.expiredAt === undefined && !isExpired(entry, asOf)
  );
}

export interface SummaryAssessment {
  /** I5: true unless every source's atoms survive in the summary. */
  lossy: boolean;
  /** Each missing atom, as `<source id>: <atom>`. */
  lossyReasons: string[];
  /** Per source: whether the summary keeps all of its facts (key B of the two-key check). */
  lossless: Map<string, boolean>;
}

/** The atom check of design 4.3 applied to a summary and each of its sources. */
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
 * as confident as its least confident one, as fresh as its least fresh one, and it names
 * its sources (`derivedFrom`) and the run that wrote it (`source.ref`).
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
    terms: terms(text),
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
