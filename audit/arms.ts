import type { ReadCondition } from './records';
import { seededRandom, seedOf } from '../core/seededRandom';
import { assertEvictionBoundary } from '../core/config';
import {
  oldestWriteFirst,
  reclaimStep,
  storageView,
  type ReclaimEntry,
  type ReclaimPolicy,
  type ReclaimStep,
} from '../core/nightly/reclaim';
import { terms } from '../core/text';
import { bm25, termCounts, type TermCounts } from '../core/bm25';
import {
  BACKGROUND_SAMPLE,
  backgroundOf,
  fuseScores,
  nearestFoundByMeaning,
  placeNearest,
  semanticDepth,
} from '../core/hybrid';

/**
 * The eviction arms and read-time conditions of the restore-counterfactual audit, pure. A
 * memory unit is one conversation turn; every arm keeps a subset of the units within a token
 * budget, and a read condition picks the units the reader sees.
 */
export interface MemoryUnit {
  id: string;
  sessionId: string;
  turn: number;
  role: 'user' | 'assistant';
  /** Write time: the session date, offset by the unit's position so it orders the haystack. */
  at: number;
  tokens: number;
  text: string;
}

/** A unit as handed to the reader; `truncated` when the restore cap cut its text. */
export interface ContextUnit extends MemoryUnit {
  truncated?: boolean;
}

export function chronological<T extends MemoryUnit>(units: readonly T[]): T[] {
  return [...units].sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

export function totalTokens(units: readonly MemoryUnit[]): number {
  return units.reduce((s, u) => s + u.tokens, 0);
}

/** Evict in `order` until what is left fits the budget; returns the ids kept. */
function keepAfterEvicting(units: readonly MemoryUnit[], order: readonly MemoryUnit[], budget: number) {
  const kept = new Set(units.map((u) => u.id));
  let tokens = totalTokens(units);
  for (const u of order) {
    if (tokens <= budget) break;
    if (!kept.delete(u.id)) continue;
    tokens -= u.tokens;
  }
  return kept;
}

function shuffled<T>(items: readonly T[], seed: string): T[] {
  const random = seededRandom(seedOf(seed));
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** FIFO: the oldest units go first. */
export function retainFifo(units: readonly MemoryUnit[], budget: number): Set<string> {
  return keepAfterEvicting(units, chronological(units), budget);
}

/** Random: a seeded permutation; the same seed nests budgets (a smaller budget keeps a subset). */
export function retainRandom(units: readonly MemoryUnit[], budget: number, seed: string): Set<string> {
  return keepAfterEvicting(units, shuffled(chronological(units), seed), budget);
}

function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 || b.size === 0) return 0;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let shared = 0;
  for (const t of small) if (large.has(t)) shared++;
  return shared / (a.size + b.size - shared);
}

/**
 * Redundancy-aware: repeatedly evict the unit most similar (term Jaccard) to another unit
 * still kept, so near-duplicates go before unique content; ties go to the older unit.
 */
export function retainRedundancyAware(units: readonly MemoryUnit[], budget: number): Set<string> {
  const ordered = chronological(units);
  const n = ordered.length;
  const termSets = ordered.map((u) => new Set(terms(u.text)));
  const similarity = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const s = jaccard(termSets[i]!, termSets[j]!);
      similarity[i * n + j] = s;
      similarity[j * n + i] = s;
    }
  }
  const alive = new Array<boolean>(n).fill(true);
  const best = new Float64Array(n);
  const partner = new Int32Array(n).fill(-1);
  const refresh = (i: number) => {
    best[i] = -1;
    partner[i] = -1;
    for (let j = 0; j < n; j++) {
      if (j === i || !alive[j]) continue;
      if (similarity[i * n + j]! > best[i]!) {
        best[i] = similarity[i * n + j]!;
        partner[i] = j;
      }
    }
  };
  for (let i = 0; i < n; i++) refresh(i);
  const kept = new Set(ordered.map((u) => u.id));
  let tokens = totalTokens(ordered);
  while (tokens > budget && kept.size > 0) {
    let victim = -1;
    for (let i = 0; i < n; i++) if (alive[i] && (victim === -1 || best[i]! > best[victim]!)) victim = i;
    alive[victim] = false;
    kept.delete(ordered[victim]!.id);
    tokens -= ordered[victim]!.tokens;
    for (let i = 0; i < n; i++) if (alive[i] && partner[i] === victim) refresh(i);
  }
  return kept;
}

/** Importance: the lowest scores go first, ties to the older unit. Scores never saw the question. */
export function retainByImportance(
  units: readonly MemoryUnit[],
  scores: ReadonlyMap<string, number>,
  budget: number,
): Set<string> {
  const order = chronological(units)
    .map((u, i) => ({ u, i, score: scores.get(u.id) ?? 0 }))
    .sort((a, b) => a.score - b.score || a.i - b.i)
    .map((x) => x.u);
  return keepAfterEvicting(units, order, budget);
}

/** The fraction of tokens a budget forces out: what a random policy evicts of anything, gold included. */
export function baselineEvictionRate(units: readonly MemoryUnit[], budget: number): number {
  const total = totalTokens(units);
  return total === 0 ? 0 : Math.max(0, 1 - budget / total);
}

/**
 * The control arm: each gold unit is evicted with `factor` times the baseline rate (capped
 * at 1), then random non-gold units until the budget fits. A sanity check that the audit
 * sees destruction where it is planted.
 */
export function retainGoldControl(
  units: readonly MemoryUnit[],
  goldIds: ReadonlySet<string>,
  budget: number,
  seed: string,
  factor = 3,
): Set<string> {
  const random = seededRandom(seedOf(`${seed}:gold`));
  const goldRate = Math.min(1, factor * baselineEvictionRate(units, budget));
  const ordered = chronological(units);
  const gold = ordered.filter((u) => goldIds.has(u.id));
  const doomed = gold.filter(() => random() < goldRate);
  const spared = gold.filter((u) => !doomed.includes(u));
  const rest = shuffled(
    ordered.filter((u) => !goldIds.has(u.id)),
    seed,
  );
  return keepAfterEvicting(units, [...doomed, ...rest, ...spared], budget);
}

const termCountsOf = new WeakMap<MemoryUnit, TermCounts>();
function counted(u: MemoryUnit): TermCounts {
  let c = termCountsOf.get(u);
  if (!c) {
    c = termCounts(u.text);
    termCountsOf.set(u, c);
  }
  return c;
}

/**
 * BM25 (core/bm25.ts) of every unit against the query, 0 for a unit sharing no term with
 * it, with the statistics over every unit searched; and the ceiling hybrid fusion measures a
 * score against.
 */
function bm25Scores(
  query: string,
  units: readonly MemoryUnit[],
): Map<MemoryUnit, number> & { ceiling: number } {
  const { scores, ceiling } = bm25(terms(query), units.map(counted));
  return Object.assign(new Map(units.map((u, i) => [u, scores[i]!])), { ceiling });
}

/** Newer first, then by id: the frozen ranker's tie-break. */
function byRecency(a: MemoryUnit, b: MemoryUnit): number {
  return b.at - a.at || (a.id < b.id ? -1 : 1);
}

/**
 * The frozen lexical ranker: BM25 over the units searched, ties (including every unit that
 * shares no term with the query) broken by recency. Apart from memgate's recall (no salience,
 * no postings budget) so tuning recall never moves the audit's read condition; BM25 itself is
 * the one in core/bm25.ts, so a change there moves both.
 */
export function rankTopK(query: string, units: readonly MemoryUnit[], k: number): MemoryUnit[] {
  const scores = bm25Scores(query, units);
  return [...units].sort((a, b) => scores.get(b)! - scores.get(a)! || byRecency(a, b)).slice(0, k);
}

/** What the hybrid ranker needs beyond the text: the question's vector and each unit's. */
export interface SemanticView {
  query: Float32Array;
  vectors: ReadonlyMap<string, Float32Array>;
  /** The reference passages' vectors, of the same model (core/referencePassages.ts). */
  reference: readonly Float32Array[];
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/**
 * The hybrid ranker (`--ranker hybrid`): memgate's fusion (core/hybrid.ts) of the frozen
 * BM25 ranking and the nearest units by embedding, as hybrid recall fuses them; the slots
 * neither fills go to the most recent units, as with the frozen ranker.
 */
export function rankHybridTopK(
  query: string,
  units: readonly MemoryUnit[],
  k: number,
  semantic: SemanticView,
): MemoryUnit[] {
  const scores = bm25Scores(query, units);
  const lexical = units
    .filter((u) => scores.get(u)! > 0)
    .sort((a, b) => scores.get(b)! - scores.get(a)! || byRecency(a, b));
  const all = units
    .flatMap((u) => {
      const v = semantic.vectors.get(u.id);
      return v ? [{ u, similarity: dot(semantic.query, v) }] : [];
    })
    .sort((a, b) => b.similarity - a.similarity || byRecency(a.u, b.u));
  // The background as recall reads it: a sample of the query's similarities, spaced evenly.
  const step = Math.max(1, all.length / BACKGROUND_SAMPLE);
  const sample = Array.from(
    { length: Math.min(all.length, BACKGROUND_SAMPLE) },
    (_, i) => all[Math.floor(i * step)]!.similarity,
  );
  const byId = new Map(units.map((u) => [u.id, u]));
  const background = backgroundOf([...sample, ...semantic.reference.map((r) => dot(semantic.query, r))]);
  const semanticScores = background && {
    similarities: all.slice(0, semanticDepth(k)).map((x) => ({ id: x.u.id, similarity: x.similarity })),
    background,
  };
  const fused = placeNearest(
    fuseScores(
      { scores: lexical.map((u) => ({ id: u.id, score: scores.get(u)! })), ceiling: scores.ceiling },
      semanticScores,
    ),
    k,
    semanticScores && nearestFoundByMeaning(semanticScores),
  ).map((f) => byId.get(f.id)!);
  const chosen = new Set(fused.slice(0, k));
  const fill = [...units].filter((u) => !chosen.has(u)).sort(byRecency);
  return [...chosen, ...fill].slice(0, k);
}

/** Units the frozen ranker hands the reader. */
export const TOP_K = 60;

/**
 * The read context of a condition over the units a read setting can reach: top-60 is the
 * ranker's top 60; forced-gold puts every surviving gold unit in and fills the same 60 slots
 * from the ranker. Presented in chronological order.
 */
export function readContext(
  condition: ReadCondition,
  query: string,
  reachable: readonly MemoryUnit[],
  goldIds: ReadonlySet<string>,
  semantic?: SemanticView,
): MemoryUnit[] {
  const rank = (units: readonly MemoryUnit[], k: number) =>
    semantic ? rankHybridTopK(query, units, k, semantic) : rankTopK(query, units, k);
  if (condition === 'top-60') return chronological(rank(reachable, TOP_K));
  const gold = reachable.filter((u) => goldIds.has(u.id));
  const others = rank(
    reachable.filter((u) => !goldIds.has(u.id)),
    Math.max(0, TOP_K - gold.length),
  );
  return chronological([...gold, ...others]);
}

/**
 * The context plus the units to restore that it lacks, appended (the gold position), capped
 * at `capTokens` restored tokens: the unit that crosses the cap is cut and marked truncated.
 */
export function withRestored(
  context: readonly MemoryUnit[],
  restore: readonly MemoryUnit[],
  capTokens: number,
): { units: ContextUnit[]; added: ContextUnit[] } {
  const present = new Set(context.map((u) => u.id));
  const added: ContextUnit[] = [];
  let room = capTokens;
  for (const u of chronological(restore)) {
    if (present.has(u.id) || room <= 0) continue;
    if (u.tokens <= room) {
      added.push(u);
      room -= u.tokens;
    } else {
      added.push({ ...u, text: u.text.slice(0, room * 4), tokens: room, truncated: true });
      room = 0;
    }
  }
  return { units: [...context, ...added], added };
}

/**
 * The placebo: each restored unit replaced, in place, by unrelated text of the same length
 * drawn in order from `filler`. If the placebo flips a question too, the restore's gain was
 * about length or position, not evidence.
 */
export function placeboFor(added: readonly ContextUnit[], filler: readonly MemoryUnit[]): ContextUnit[] {
  const source = filler.map((u) => u.text).join('\n');
  let offset = 0;
  return added.map((u) => {
    let text = '';
    while (text.length < u.text.length && source.length > 0) {
      const take = source.slice(offset, offset + (u.text.length - text.length));
      text += take;
      offset = (offset + take.length) % source.length;
    }
    return { ...u, id: `placebo:${u.id}`, text };
  });
}

/**
 * memgate's arm: reclaim's own storage ranking (`oldestWriteFirst`) and two-key check
 * (`reclaimStep`), with a token budget as the target where the nightly
 * reclaim counts entries against its watermarks. Every candidate is spilled unless the check
 * proves it dead.
 */
export function planReclaimToBudget(
  hot: readonly ReclaimEntry[],
  budget: number,
  asOf: number,
  policy: ReclaimPolicy,
): ReclaimStep[] {
  assertEvictionBoundary(policy.reclaimFloor, policy.gateThreshold);
  const byId = new Map(hot.map((e) => [e._id, e]));
  let tokens = hot.reduce((sum, e) => sum + e.tokens, 0);
  const plan: ReclaimStep[] = [];
  for (const view of hot.map(storageView).sort((a, b) => oldestWriteFirst.compare(a, b))) {
    if (tokens <= budget) break;
    plan.push(reclaimStep(byId.get(view.id)!, plan.length, asOf, policy));
    tokens -= view.tokens;
  }
  return plan;
}
