import { z } from 'zod';
import { assertNotAhead } from './clock';
import {
  agentIdSchema,
  epochMs,
  isExpired,
  wellFormedString,
  zodIssues,
  type Entry,
  type Tier,
} from './entry';
import { InvalidInputError } from './errors';
import { DAY_MS, dayOf, salienceAt, type Salience } from './salience';
import { terms } from './text';
import { bm25, storedTermCounts, termCounts, type TermCounts } from './bm25';
import { fuseScores, nearestFoundByMeaning, placeNearest, type Background, type FoundBy } from './hybrid';

export const recallRequestSchema = z.strictObject({
  agentId: agentIdSchema,
  query: wellFormedString
    .max(4000, 'at most 4000 characters')
    .refine((q) => terms(q).length > 0, 'must contain at least one searchable word'),
  k: z.number().int().min(1).max(200).default(10),
  deep: z.boolean().default(false),
  /**
   * Evaluate the gate at this instant (simulations and tests); defaults to now. The recall is
   * logged at it, so `parseRecallRequest` bounds it (`RecallBounds`).
   */
  asOf: epochMs.optional(),
});

/**
 * The distinct terms of a query that recall reads, ranks and logs: its first 64. Each costs a
 * read of its document frequency, and the night refreshes by the logged ones; a query of
 * 4,000 single CJK characters has about 2,000. A question of a paragraph has fewer than 64.
 */
export const MAX_QUERY_TERMS = 64;

export function queryTermsOf(query: string): string[] {
  return terms(query).slice(0, MAX_QUERY_TERMS);
}

/**
 * How much of a query is embedded, in tokens (estimated: the tokenizer is the model's). A
 * model's time grows with its input, and every recall's query waits at one server for those
 * before it: a query of 4,000 CJK characters holds a one-thread server for seconds, and a
 * tenant sending them would hold up every other tenant's recall (docs/serving.md, Embeddings
 * in two lanes). So it is bounded, like the query's terms: 128 keeps a question of a short
 * paragraph whole (about 500 characters of English; the longest question of the retrieval
 * benchmark has 258), and a long query costs what such a question costs.
 */
export const QUERY_EMBEDDING_TOKENS = 128;

/**
 * The beginning of a query that `QUERY_EMBEDDING_TOKENS` holds, cut at a space where there is
 * one: an ASCII character counts a quarter of a token (English averages about four a token),
 * any other a whole one (a CJK character is about one), so the estimate errs high.
 */
export function embeddedQueryOf(query: string): string {
  let tokens = 0;
  let end = 0;
  for (const ch of query) {
    tokens += ch.charCodeAt(0) < 0x80 ? 0.25 : 1;
    if (tokens > QUERY_EMBEDDING_TOKENS) break;
    end += ch.length;
  }
  if (end === query.length) return query;
  const cut = query.slice(0, end);
  if (/\s/.test(query[end]!)) return cut.trimEnd();
  const space = cut.search(/\s\S*$/);
  return (space > 0 ? cut.slice(0, space) : cut).trimEnd();
}

export type RecallRequestInput = z.input<typeof recallRequestSchema>;
export type RecallRequest = z.output<typeof recallRequestSchema>;

/**
 * Parse or throw InvalidInputError. `now` is the deciding clock (the client's, which every
 * recall, HTTP and MCP too, goes through): `asOf`, at which the recall is logged, is bounded
 * as a write's time is, not past it by more than the skew allowed (core/clock.ts).
 */
export function parseRecallRequest(input: unknown, now: number): RecallRequest {
  const parsed = recallRequestSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError('invalid recall', zodIssues(parsed.error));
  if (parsed.data.asOf !== undefined) assertNotAhead(parsed.data.asOf, now, 'asOf', 'recall');
  return parsed.data;
}

/**
 * The oldest `asOf` a recall may take once the agent has had a night at `lastNightAsOf`: the
 * first day that night kept of the query log. A recall is logged at its `asOf`, and a record
 * older than that would be past the retention the day it is written. The agent's nights are
 * its clock, not this process's: a simulated or replayed timeline runs on `asOf` throughout.
 */
export function oldestKeptAsOf(lastNightAsOf: number, queryLogRetentionDays: number): number {
  return (dayOf(lastNightAsOf) - queryLogRetentionDays) * DAY_MS;
}

/** InvalidInputError when `asOf` is older than the query log keeps (`oldestKeptAsOf`). */
export function assertKeptByQueryLog(asOf: number, oldest: number, queryLogRetentionDays: number): void {
  if (asOf >= oldest) return;
  throw new InvalidInputError('invalid recall', [
    {
      path: 'asOf',
      message: `${new Date(asOf).toISOString()} is older than the query log keeps: the agent's last night kept recalls from ${new Date(oldest).toISOString()} (MEMGATE_QUERY_LOG_RETENTION_DAYS = ${queryLogRetentionDays})`,
    },
  ]);
}

export interface RecallHit {
  id: string;
  text: string;
  kind: Entry['kind'];
  tier: Tier;
  /** Below the gate now: only deep recall returns it. */
  dormant: boolean;
  salience: number;
  score: number;
  lossy_summary: boolean;
  isActive: boolean;
  supersededBy?: string;
  supersedes?: string;
  expired: boolean;
  source: Entry['source'];
  writtenAt: number;
  /** Whether its words, its meaning or both found it (lexical only when recall is). */
  foundBy: FoundBy;
  /** Cosine similarity to the query, when the semantic ranking held it. */
  similarity?: number;
}

export interface Candidate<E extends HitView = Entry> {
  entry: E;
  tier: Tier;
}

/**
 * The fields of an entry that a hit and the tier filter read: a neighbour found by meaning is
 * read with these alone, not the derived arrays (terms, their counts and keys, atoms) that only
 * lexical scoring and the night need, which are most of a stored entry's bytes.
 */
export type HitView = Omit<Entry, (typeof NOT_IN_HIT_VIEW)[number]>;

/** What a read of a hit's view leaves out (store/tiers.ts, findHitView). */
export const NOT_IN_HIT_VIEW = [
  'terms',
  'termCounts',
  'termKeys',
  'liveKeys',
  'atoms',
  'pending',
  'dormantKey',
  'lastWriteKey',
] as const;

/**
 * Default recall's tier filter (the gate; docs/recall.md, Default and deep recall): an active,
 * unexpired hot entry above the gate. Dormant entries are not dead; only deep recall returns them.
 */
export function inDefaultRecall(
  entry: Pick<Entry, 'isActive' | 'validity' | 'dormantAt'>,
  now: number,
): boolean {
  return entry.isActive && !isExpired(entry, now) && entry.dormantAt > now;
}

/**
 * What default recall's filter reads of an entry, kept beside its vector (VectorRecord's
 * `recall`) so that the nearest-neighbour search applies the filter itself and no entry is
 * read only to be rejected. Recall still judges each entry it reads, so a state kept that
 * admits more than the entry's costs a read, never a hit; one that admits less would cost
 * hits, so a change that admits more widens the kept state before it is made
 * (store/vectors.ts, restateForRecall).
 */
export interface RecallState {
  tier: Tier;
  isActive: boolean;
  dormantAt: number;
  /** Set only for a volatile fact: when it expires. */
  freshUntil?: number;
  /**
   * The entry's salience: with it, the most a neighbour can score is known before it is read,
   * so recall reads the neighbours that can rank, not every one that is near.
   */
  salience: Salience;
}

export function recallStateOf(
  entry: Pick<Entry, 'isActive' | 'dormantAt' | 'validity' | 'salience'>,
  tier: Tier,
): RecallState {
  const state: RecallState = {
    tier,
    isActive: entry.isActive,
    dormantAt: entry.dormantAt,
    salience: { base: entry.salience.base, at: entry.salience.at },
  };
  if (entry.validity.volatile && entry.validity.freshUntil !== undefined)
    state.freshUntil = entry.validity.freshUntil;
  return state;
}

/** inDefaultRecall, judged on the state kept beside a vector: the same rule. */
export function stateInDefaultRecall(state: Omit<RecallState, 'salience'>, now: number): boolean {
  const validity = { volatile: state.freshUntil !== undefined, freshUntil: state.freshUntil };
  return state.tier === 'hot' && inDefaultRecall({ ...state, validity }, now);
}

/** A state that admits, at every time, whatever either admits. */
export function widerRecallState(a: RecallState, b: RecallState): RecallState {
  // Salience decays alike for every entry of an agent, so the later to go dormant is the more
  // salient at every time: its salience bounds both.
  const state: RecallState = {
    tier: a.tier === 'hot' || b.tier === 'hot' ? 'hot' : 'cold',
    isActive: a.isActive || b.isActive,
    dormantAt: Math.max(a.dormantAt, b.dormantAt),
    salience: a.dormantAt >= b.dormantAt ? a.salience : b.salience,
  };
  if (a.freshUntil !== undefined && b.freshUntil !== undefined)
    state.freshUntil = Math.max(a.freshUntil, b.freshUntil);
  return state;
}

/** Whether two states filter and bound alike at every time. */
export function sameRecallState(a: RecallState | undefined, b: RecallState): boolean {
  return (
    a !== undefined &&
    a.tier === b.tier &&
    a.isActive === b.isActive &&
    a.dormantAt === b.dormantAt &&
    a.freshUntil === b.freshUntil &&
    // Absent on states kept before salience was.
    a.salience?.base === b.salience.base &&
    a.salience?.at === b.salience.at
  );
}

/**
 * Postings read per query, at most: the candidates are read whole, and the store's cost is
 * per document read, so this bounds a recall's cost whatever the store's size.
 */
export const POSTINGS_BUDGET = { default: 200, deep: 400 } as const;

/**
 * Query terms read for candidates, at most: with the postings budget, this bounds the
 * documents one recall reads (`MAX_TERM_READS` × the budget) however long the query, since
 * a term not counted yet (new since the last night) costs nothing against the budget. The
 * rarest terms are read; every term still counts in the score of what they find.
 */
export const MAX_TERM_READS = 8;

/**
 * Rounds of reads by term one recall makes at most: after the first, a round reads only the
 * terms that take the places of those found empty, so a question of many words the agent
 * never wrote costs a few more round trips, not one per word.
 */
export const MAX_TERM_ROUNDS = 4;

/**
 * Characters of candidate text one recall ranks, at most. The budgets above bound how many
 * candidates a recall reads, not their size: deep recall's 6,400 of 16,000 characters each
 * would be 100 M. Candidates are ranked in the order they were read (the rarest terms' first,
 * hot before cold); those past this are left out of the ranking, and the result counts them.
 */
export const MAX_RANKED_CHARS = 8_000_000;

/** The candidates a recall ranks, within MAX_RANKED_CHARS (the first always), and how many are left out. */
export function withinRankedBudget(candidates: readonly Candidate[]): {
  ranked: Candidate[];
  overBudget: number;
} {
  let chars = 0;
  let n = 0;
  while (n < candidates.length && (n === 0 || chars + candidates[n]!.entry.text.length <= MAX_RANKED_CHARS))
    chars += candidates[n++]!.entry.text.length;
  return { ranked: candidates.slice(0, n), overBudget: candidates.length - n };
}

/**
 * Which query terms propose candidates, rarest first, while their postings fit the budget;
 * the rarest always does, read up to the budget. A term held by more entries than that says
 * little about which one is meant (its idf is near zero), so search engines skip it; it
 * still counts in the score of the candidates the rarer terms found. A term missing from
 * `df` (not counted yet: new since the last nightly run) counts as rare. Terms in `empty`
 * were read and hold nothing (a word the agent never wrote, which is uncounted too): they
 * take no place, so the next terms are read in theirs.
 */
export function candidateTerms(
  queryTerms: readonly string[],
  df: ReadonlyMap<string, number>,
  budget: number,
  empty: ReadonlySet<string> = new Set(),
): { term: string; limit: number }[] {
  const ordered = [...new Set(queryTerms)]
    .filter((t) => !empty.has(t))
    .sort((a, b) => (df.get(a) ?? 0) - (df.get(b) ?? 0) || (a < b ? -1 : a > b ? 1 : 0));
  const chosen: { term: string; limit: number }[] = [];
  let spent = 0;
  for (const term of ordered) {
    const postings = df.get(term) ?? 0;
    if (chosen.length > 0 && (spent + postings > budget || chosen.length >= MAX_TERM_READS)) break;
    chosen.push({ term, limit: budget });
    spent += postings;
  }
  return chosen;
}

/** A candidate with its BM25 score against the query (before salience). */
export interface Scored {
  candidate: Candidate;
  lexical: number;
}

interface Doc extends TermCounts {
  c: Candidate;
}

/** Whether the entry stores its term counts (one per term), or must be tokenised. */
function countsStored(entry: Entry): entry is Entry & { termCounts: number[] } {
  return entry.termCounts !== undefined && entry.termCounts.length === entry.terms.length;
}

/** Only the query's terms are counted: the others never score. */
function termFrequencies(candidates: readonly Candidate[], queryTerms: ReadonlySet<string>): Doc[] {
  return candidates.map((c) => ({
    c,
    ...(countsStored(c.entry)
      ? storedTermCounts(c.entry.terms, c.entry.termCounts, queryTerms)
      : termCounts(c.entry.text, queryTerms)),
  }));
}

/** What scoring a candidate costs, in characters read: its stored terms, or its text. */
function scoringCost(entry: Entry): number {
  return countsStored(entry) ? entry.terms.length : entry.text.length;
}

function scoreDocs(queryTerms: readonly string[], docs: readonly Doc[]): Scored[] & { ceiling: number } {
  const { scores, ceiling } = bm25(queryTerms, docs);
  const scored = docs
    .map(({ c }, i) => ({ candidate: c, lexical: scores[i]! }))
    .filter((s) => s.lexical > 0)
    .sort((a, b) => b.lexical - a.lexical || b.candidate.entry.writtenAt - a.candidate.entry.writtenAt);
  return Object.assign(scored, { ceiling });
}

/**
 * BM25 over the candidate set: the candidates that hold a query term, best first (ties to
 * the newer write), and the ceiling: what a candidate of average length holding every query
 * term once would score, the sum of the terms' idf. The hybrid fusion measures a score
 * against the ceiling (core/hybrid.ts).
 */
export function scoreLexical(
  queryTerms: readonly string[],
  candidates: readonly Candidate[],
): Scored[] & { ceiling: number } {
  return scoreDocs(queryTerms, termFrequencies(candidates, new Set(queryTerms)));
}

/**
 * Characters tokenised (or stored terms read) between two turns of the event loop (a few
 * milliseconds of work): a deep recall reads up to 6,400 candidates, of up to 16,000
 * characters each, in a process that also acknowledges writes and heartbeats activities.
 * Entries stored with their term counts cost their terms, not their text.
 */
export const SCORING_TURN_CHARS = 200_000;

/** `scoreLexical`, giving the event loop a turn after each `SCORING_TURN_CHARS` tokenised. */
export async function scoreLexicalInTurns(
  queryTerms: readonly string[],
  candidates: readonly Candidate[],
): Promise<Scored[] & { ceiling: number }> {
  const wanted = new Set(queryTerms);
  const docs: Doc[] = [];
  for (let i = 0; i < candidates.length;) {
    let chars = 0;
    const start = i;
    while (i < candidates.length && (i === start || chars < SCORING_TURN_CHARS))
      chars += scoringCost(candidates[i++]!.entry);
    docs.push(...termFrequencies(candidates.slice(start, i), wanted));
    if (i < candidates.length) await new Promise((resolve) => setImmediate(resolve));
  }
  return scoreDocs(queryTerms, docs);
}

/** Those that score, best first, ties to the newer write. */
function bestFirst(hits: RecallHit[]): RecallHit[] {
  return hits.filter((h) => h.score > 0).sort((a, b) => b.score - a.score || b.writtenAt - a.writtenAt);
}

/** The top k by score. */
function topK(hits: RecallHit[], k: number): RecallHit[] {
  return bestFirst(hits).slice(0, k);
}

/** Lexical recall: each candidate's BM25 score multiplied by its current salience. */
export function rankCandidates(
  queryTerms: readonly string[],
  candidates: readonly Candidate[],
  opts: { now: number; halfLifeMs: number; gateThreshold: number; k: number },
): RecallHit[] {
  return rankScored(scoreLexical(queryTerms, candidates), opts);
}

/** The top k of scored candidates, each score multiplied by its current salience. */
export function rankScored(
  scored: readonly Scored[],
  opts: { now: number; halfLifeMs: number; gateThreshold: number; k: number },
): RecallHit[] {
  return topK(
    scored.map((s) => recallHit(s.candidate, opts.now, opts.halfLifeMs, s.lexical, 'lexical')),
    opts.k,
  );
}

/**
 * Hybrid recall: the lexical scores and the semantic list (the nearest neighbours that passed
 * the same tier filter, nearest first, with the query's background) fused into one relevance
 * (core/hybrid.ts), which is multiplied by the entry's current salience, as a lexical score is;
 * the nearest of the list found by meaning keeps a place in the top k (`placeNearest`).
 */
export function rankHybrid(
  lexical: readonly Scored[] & { ceiling: number },
  semantic: readonly { candidate: Candidate<HitView>; similarity: number }[],
  opts: { now: number; halfLifeMs: number; k: number; background: Background },
): RecallHit[] {
  const byId = new Map<string, Candidate<HitView>>();
  for (const s of lexical) byId.set(s.candidate.entry._id, s.candidate);
  const similarity = new Map<string, number>();
  for (const s of semantic) {
    if (!byId.has(s.candidate.entry._id)) byId.set(s.candidate.entry._id, s.candidate);
    similarity.set(s.candidate.entry._id, s.similarity);
  }
  const semanticScores = {
    similarities: semantic.map((s) => ({ id: s.candidate.entry._id, similarity: s.similarity })),
    background: opts.background,
  };
  const fused = fuseScores(
    {
      scores: lexical.map((s) => ({ id: s.candidate.entry._id, score: s.lexical })),
      ceiling: lexical.ceiling,
    },
    semanticScores,
  );
  const hits = fused.map((f) => {
    const hit = recallHit(byId.get(f.id)!, opts.now, opts.halfLifeMs, f.relevance, f.foundBy);
    const sim = similarity.get(f.id);
    if (sim !== undefined) hit.similarity = sim;
    return hit;
  });
  return placeNearest(bestFirst(hits), opts.k, nearestFoundByMeaning(semanticScores)).slice(0, opts.k);
}

/**
 * The top k hybrid recall returns if every neighbour still unread scores its bound (it is
 * stored, passes the filter, and the state kept beside its vector is its own), the nearest
 * neighbour found by meaning (`nearest`) in its place: the ids recall logs while it reads
 * them (store/recall.ts), set right after in the rare case they differ.
 */
export function expectedTopK(
  hits: readonly Pick<RecallHit, 'id' | 'score' | 'foundBy'>[],
  unread: readonly { id: string; bound: number }[],
  k: number,
  nearest: string | undefined,
): Pick<RecallHit, 'id' | 'foundBy'>[] {
  const ranked = [
    ...hits.map(({ id, score, foundBy }) => ({ id, score, foundBy })),
    ...unread.map(({ id, bound }) => ({ id, score: bound, foundBy: 'semantic' as const })),
  ]
    .filter((h) => h.score > 0)
    .sort((a, b) => b.score - a.score);
  return placeNearest(ranked, k, nearest)
    .slice(0, k)
    .map(({ id, foundBy }) => ({ id, foundBy }));
}

/**
 * Whether an entry that would score at most `bound` could still be among the top k of
 * `hits` (ranked best first): the stopping rule of hybrid recall's neighbour reads, after
 * Fagin's threshold algorithm. A tie could enter (ties go to the newer write).
 */
export function couldEnterTopK(hits: readonly RecallHit[], k: number, bound: number): boolean {
  return hits.length < k || bound >= hits[k - 1]!.score;
}

/** A hit for one candidate: its relevance (BM25, or the fused one) weighted by its salience now. */
export function recallHit(
  c: Candidate<HitView>,
  now: number,
  halfLifeMs: number,
  relevance: number,
  foundBy: FoundBy,
): RecallHit {
  const salience = salienceAt(c.entry.salience, now, halfLifeMs);
  const e = c.entry;
  const hit: RecallHit = {
    id: e._id,
    text: e.text,
    kind: e.kind,
    tier: c.tier,
    dormant: e.dormantAt <= now,
    salience,
    score: relevance * salience,
    foundBy,
    lossy_summary: e.lossy_summary === true,
    isActive: e.isActive,
    expired: isExpired(e, now),
    source: e.source,
    writtenAt: e.writtenAt,
  };
  if (e.supersededBy) hit.supersededBy = e.supersededBy;
  if (e.supersedes) hit.supersedes = e.supersedes;
  return hit;
}
