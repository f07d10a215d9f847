/**
 * Turn-level retrieval on LongMemEval-format questions: for each question, every turn of its
 * haystack (both roles) ranked for the question text, lexically (memgate's BM25 over the turns
 * sharing a term with it) and hybrid (the fusion of those scores with the similarities of
 * the `semanticDepth(10)` nearest turns, each against the question's background, as hybrid recall fuses
 * them: core/hybrid.ts). The evidence
 * turns (`has_answer`) are the relevant ones; a question without any is skipped.
 *
 * Data: BENCH_RETRIEVAL_DATA (a folder or file of LongMemEval questions), by default
 * ../shared/data/longmemeval-s beside the repository. Embeddings: the configured model, on
 * MEMGATE_EMBEDDINGS_URL or else the local stack's embeddings server; vectors are cached under
 * the cache dir, so a rerun embeds nothing.
 *
 * Prints {"questions","lexical":{"recall5","recall10","ndcg10"},"hybrid":{…},"diffRecall10CI"}
 * then extras. Recall is the fraction of a question's evidence turns in the top k, averaged
 * over questions. `arms` holds every measure of each ranking, the semantic one alone included:
 * also `recallAll` (1 when every evidence turn is in the top k: LongMemEval's own Recall@k)
 * and `recallAny`. The interval is a paired bootstrap of hybrid − lexical in Recall@10.
 *
 * Beside them, `paraphrase`: the paraphrase check of test/fixtures/paraphrase.json, which
 * test/integration/paraphrase.test.ts runs through the HTTP API. For each set (`main`, and
 * `heldOut`, which no setting may be chosen on), its facts among its unrelated notes as one
 * agent's memory, and for each fact its question, which shares at most one word with it:
 * how many facts are in their question's top 5, by each ranking above.
 */
import { join } from 'node:path';
import { listQuestions, loadQuestion, haystackTurns } from '../audit/longMemEval';
import { parseConfig, type Config } from '../core/config';
import { InvalidInputError, StackUnavailableError } from '../core/errors';
import {
  BACKGROUND_SAMPLE,
  backgroundOf,
  FOUND_AT_SPREADS,
  FULL_AT_SPREADS,
  fuseScores,
  LEXICAL_WEIGHT,
  nearestFoundByMeaning,
  placeNearest,
  semanticDepth,
} from '../core/hybrid';
import { REFERENCE_PASSAGES } from '../core/referencePassages';
import { embeddedQueryOf } from '../core/recall';
import { seededRandom } from '../core/seededRandom';
import { createEmbedder } from '../llm';
import type { Embedder } from '../llm/embedder';
import { configuredEmbeddings, localEmbeddings } from '../stack/connection';
import { embeddingCacheDir, embeddingsUp, localEmbeddingsUnavailable, stackDown } from '../stack/stack';
import { openEmbeddingCache, type EmbeddingCache } from '../llm/embeddingCache';
import paraphrase from '../test/fixtures/paraphrase.json';
import {
  bm25Ranking,
  cosineRanking,
  mean,
  ndcgAt,
  pairedBootstrapCI,
  recallAllAt,
  recallAnyAt,
  recallAt,
} from './retrievalMetrics';
import { emit, round } from './support';

const DATA =
  process.env.BENCH_RETRIEVAL_DATA ?? join(__dirname, '..', '..', 'shared', 'data', 'longmemeval-s');
/** The cut-off recall would serve: the largest k measured, which sets the semantic depth. */
const K = 10;
const RESAMPLES = 10_000;
const SEED = 20241014;

/**
 * What LongMemEval's paper (Wu et al., 2024) offers to set beside these figures: nothing
 * comparable was found, so no number is quoted rather than one from another setting.
 */
const PAPER = {
  source: 'Wu et al., 2024, LongMemEval, arXiv 2410.10813; github.com/xiaowu0162/LongMemEval',
  note:
    'No turn-level LongMemEval_S retrieval figures were found. As its code and readers quoting its ' +
    'tables have it, the paper measures retrieval on LongMemEval_M (about 500 sessions a question, ' +
    'not 50), over user-side keys (turns, rounds or sessions), and its Recall@k counts a question ' +
    'only when every evidence item is in the top k (recallAll here).',
};

type Arm = 'lexical' | 'semantic' | 'hybrid';
const ARMS: readonly Arm[] = ['lexical', 'semantic', 'hybrid'];

type Scores = Record<
  'recall5' | 'recall10' | 'ndcg10' | 'recallAll5' | 'recallAll10' | 'recallAny5' | 'recallAny10',
  number
>;

function score(ranking: readonly string[], relevant: ReadonlySet<string>): Scores {
  return {
    recall5: recallAt(ranking, relevant, 5),
    recall10: recallAt(ranking, relevant, 10),
    ndcg10: ndcgAt(ranking, relevant, 10),
    recallAll5: recallAllAt(ranking, relevant, 5),
    recallAll10: recallAllAt(ranking, relevant, 10),
    recallAny5: recallAnyAt(ranking, relevant, 5),
    recallAny10: recallAnyAt(ranking, relevant, 10),
  };
}

function average(rows: readonly Scores[]): Scores {
  const keys = Object.keys(rows[0]!) as (keyof Scores)[];
  return Object.fromEntries(keys.map((key) => [key, round(mean(rows.map((r) => r[key])), 4)])) as Scores;
}

function log(line: string): void {
  console.error(`[retrieval] ${line}`);
}

/**
 * The configured endpoints, else the local stack's embeddings servers (started if need be, and
 * alone: the benchmark reads no store and runs no workflow). `started` names those ours to stop.
 */
async function embeddingsEndpoint(
  config: Config,
): Promise<{ queryUrls: string[]; passagesUrl: string; started: string[] }> {
  const configured = configuredEmbeddings(config);
  if (configured) return { ...configured, started: [] };
  const started = await embeddingsUp(config, (line) => log(`[stack] ${line}`));
  const unavailable = localEmbeddingsUnavailable(config);
  if (unavailable) {
    throw new StackUnavailableError(
      `the hybrid arm needs embeddings: ${unavailable}; or set MEMGATE_EMBEDDINGS_URL`,
    );
  }
  return { ...localEmbeddings(config, config), started };
}

const ids = (ranking: readonly { id: string }[]) => ranking.map((r) => r.id);

/**
 * The query's similarities to the reference passages, as hybrid recall adds them to its
 * background; `scale` alters every vector alike (measureParaphrases' other scales).
 */
function referenceSimilarities(
  cache: EmbeddingCache,
  question: string,
  scale: (v: Float32Array) => Float32Array = (v) => v,
): number[] {
  const query = scale(cache.get('query', embeddedQueryOf(question))!);
  return cosineRanking(
    query,
    REFERENCE_PASSAGES.map((p) => ({ id: p, vector: scale(cache.get('passage', p)!) })),
  ).map((r) => r.similarity);
}

/**
 * Hybrid recall's ranking of a haystack for the top k: the lexical scores fused with the
 * nearest turns recall reads for k, each measured against the query's background (an evenly
 * spaced sample of its similarities to the turns, as the index samples an agent's vectors,
 * and to the reference passages), the nearest in its place (core/hybrid.ts).
 */
function hybridRanking(
  lexical: ReturnType<typeof bm25Ranking>,
  semantic: ReturnType<typeof cosineRanking>,
  reference: readonly number[],
  k: number,
): string[] {
  const count = Math.min(semantic.length, BACKGROUND_SAMPLE);
  const sample = Array.from(
    { length: count },
    (_, i) => semantic[Math.floor((i * semantic.length) / count)]!.similarity,
  );
  const background = backgroundOf([...sample, ...reference])!;
  const semanticScores = { similarities: semantic.slice(0, semanticDepth(k)), background };
  return placeNearest(
    fuseScores({ scores: lexical, ceiling: lexical.ceiling }, semanticScores),
    k,
    nearestFoundByMeaning(semanticScores),
  ).map((f) => f.id);
}

interface Measured {
  results: { type: string; scores: Record<Arm, Scores> }[];
  skipped: number;
  turns: number;
}

/**
 * Question by question, embedding what is missing first: the cache fills in the order the
 * results are computed, so a killed run resumes where it stopped.
 */
async function measure(embedder: Embedder, cache: EmbeddingCache): Promise<Measured> {
  const refs = listQuestions(DATA);
  const out: Measured = { results: [], skipped: 0, turns: 0 };
  let embedded = 0;
  const started = Date.now();
  for (const [i, ref] of refs.entries()) {
    const q = loadQuestion(ref);
    const turns = haystackTurns(q);
    const relevant = new Set(turns.filter((t) => t.gold).map((t) => t.unitId));
    const tag = `${i + 1}/${refs.length} ${q.question_id}`;
    if (relevant.size === 0) {
      log(`${tag}: no evidence turns, skipped`);
      out.skipped++;
      continue;
    }
    out.turns += turns.length;
    // What recall embeds of the question (every one of these is kept whole).
    embedded += await cache.fill(embedder, 'query', [embeddedQueryOf(q.question)]);
    embedded += await cache.fill(embedder, 'passage', REFERENCE_PASSAGES);
    embedded += await cache.fill(
      embedder,
      'passage',
      turns.map((t) => t.text),
      (done, missing) => {
        if (done === missing || done % 160 === 0) log(`${tag}: embedded ${done}/${missing} new turns`);
      },
    );
    const lexical = bm25Ranking(
      q.question,
      turns.map((t) => ({ id: t.unitId, text: t.text })),
    );
    const semantic = cosineRanking(
      cache.get('query', embeddedQueryOf(q.question))!,
      turns.map((t) => ({ id: t.unitId, vector: cache.get('passage', t.text)! })),
    );
    const hybrid = hybridRanking(lexical, semantic, referenceSimilarities(cache, q.question), K);
    out.results.push({
      type: q.question_type,
      scores: {
        lexical: score(ids(lexical), relevant),
        semantic: score(ids(semantic), relevant),
        hybrid: score(hybrid, relevant),
      },
    });
    const elapsed = (Date.now() - started) / 1000;
    log(`${tag}: done (${embedded} embedded this run, ${cache.size} cached, ${elapsed.toFixed(0)} s)`);
  }
  if (out.results.length === 0) throw new InvalidInputError(`no question in ${DATA} has evidence turns`);
  return out;
}

/** The paraphrase check's cut-off: a fact counts when it is in its question's top 5. */
const PARAPHRASE_K = 5;

interface ParaphraseCounts {
  lexicalTop5: number;
  semanticTop5: number;
  hybridTop5: number;
}

interface ParaphraseFigures extends ParaphraseCounts {
  facts: number;
  /** The same check with every cosine moved to another scale (`SCALES`), words unchanged. */
  otherScales: Record<string, Omit<ParaphraseCounts, 'lexicalTop5'>>;
}

const unit = (v: Float32Array): Float32Array => {
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
};

/**
 * Other models' scales, made from this one's vectors, each applied to every vector (queries,
 * passages, reference passages) of a set:
 * - `squeezedUp`: a direction every vector shares (norm 1) and a little noise of their own
 *   (norm 0.2) appended, which puts every cosine in about 0.84–0.89;
 * - `spreadDown`: 0.9 of the reference passages' mean direction taken out, which spreads the
 *   cosines over about −0.1–0.45, as a model with another similarity scale does.
 */
function scales(reference: readonly Float32Array[]): Record<string, (v: Float32Array) => Float32Array> {
  const random = seededRandom(SEED);
  const gauss = () => Math.sqrt(-2 * Math.log(random() + 1e-12)) * Math.cos(2 * Math.PI * random());
  const squeezed = new Map<Float32Array, Float32Array>();
  const mean = new Float32Array(reference[0]!.length);
  for (const r of reference) r.forEach((x, i) => (mean[i] = mean[i]! + x / reference.length));
  return {
    squeezedUp: (v) => {
      let out = squeezed.get(v);
      if (!out) {
        const extra = Array.from(
          { length: v.length },
          (_, i) => (i === 0 ? 1 : 0) + (gauss() * 0.2) / Math.sqrt(v.length),
        );
        squeezed.set(v, (out = unit(Float32Array.from([...v, ...extra]))));
      }
      return out;
    },
    spreadDown: (v) => unit(v.map((x, i) => x - 0.9 * mean[i]!)),
  };
}

/**
 * Each paraphrase set ranked as the haystacks are, with the depth recall reads for k = 5,
 * then again at other scales; each fact hybrid misses at this model's own is logged with
 * where the meaning alone put it.
 */
async function measureParaphrases(
  embedder: Embedder,
  cache: EmbeddingCache,
): Promise<Record<string, ParaphraseFigures>> {
  const out: Record<string, ParaphraseFigures> = {};
  for (const [name, set] of Object.entries(paraphrase.sets)) {
    // In the order the HTTP check writes them (two notes, then a fact): ties go by it.
    const texts = set.notes.flatMap((note, i) =>
      i % 2 === 1 ? [note, set.facts[(i - 1) / 2]!.fact] : [note],
    );
    const docs = texts.map((text, i) => ({ id: String(i), text }));
    await cache.fill(
      embedder,
      'query',
      set.facts.map((f) => embeddedQueryOf(f.question)),
    );
    await cache.fill(embedder, 'passage', [...REFERENCE_PASSAGES, ...texts]);
    const reference = REFERENCE_PASSAGES.map((p) => cache.get('passage', p)!);
    const count = (scale: (v: Float32Array) => Float32Array, report: boolean): ParaphraseCounts => {
      const vectors = docs.map((d) => ({ id: d.id, vector: scale(cache.get('passage', d.text)!) }));
      const counts = { lexicalTop5: 0, semanticTop5: 0, hybridTop5: 0 };
      for (const f of set.facts) {
        const id = String(texts.indexOf(f.fact));
        const query = scale(cache.get('query', embeddedQueryOf(f.question))!);
        const lexical = bm25Ranking(f.question, docs);
        const semantic = cosineRanking(query, vectors);
        const background = referenceSimilarities(cache, f.question, scale);
        const hybrid = hybridRanking(lexical, semantic, background, PARAPHRASE_K);
        const inTop = (ranking: readonly string[]) => ranking.slice(0, PARAPHRASE_K).includes(id);
        if (inTop(ids(lexical))) counts.lexicalTop5++;
        if (inTop(ids(semantic))) counts.semanticTop5++;
        if (inTop(hybrid)) {
          counts.hybridTop5++;
          continue;
        }
        if (!report) continue;
        const rank = hybrid.indexOf(id);
        const meaning = semantic.findIndex((s) => s.id === id);
        log(
          `paraphrase ${f.id}: hybrid ${rank < 0 ? 'did not rank it' : `rank ${rank + 1}`}, ` +
            `semantic rank ${meaning + 1} at similarity ${semantic[meaning]!.similarity.toFixed(3)}`,
        );
      }
      return counts;
    };
    const figures: ParaphraseFigures = {
      facts: set.facts.length,
      ...count((v) => v, true),
      otherScales: Object.fromEntries(
        Object.entries(scales(reference)).map(([scale, f]) => {
          const { lexicalTop5: _words, ...rest } = count(f, false);
          return [scale, rest];
        }),
      ),
    };
    log(`paraphrase ${name}: ${JSON.stringify(figures)}`);
    out[name] = figures;
  }
  return out;
}

async function main() {
  // A longer request timeout than live recall's by default: a small machine embedding long
  // turns can take tens of seconds per batch, and a retry only queues the same work again.
  const config = parseConfig({ MEMGATE_OPENAI_TIMEOUT_MS: '120000', ...process.env });
  const endpoint = await embeddingsEndpoint(config);
  const embedder = createEmbedder(config, endpoint);
  const depth = semanticDepth(K);
  let measured: Measured;
  let paraphrases: Record<string, ParaphraseFigures>;
  try {
    const cache = openEmbeddingCache(embeddingCacheDir(config), embedder.model, embedder.dimensions);
    log(`${cache.size} vectors cached in ${cache.file}`);
    try {
      measured = await measure(embedder, cache);
      paraphrases = await measureParaphrases(embedder, cache);
    } finally {
      cache.close();
    }
  } finally {
    if (endpoint.started.length > 0) await stackDown(config, endpoint.started);
  }

  const { results } = measured;
  const arm = (a: Arm) => average(results.map((r) => r.scores[a]));
  const contract = (s: Scores) => ({ recall5: s.recall5, recall10: s.recall10, ndcg10: s.ndcg10 });
  const ci = pairedBootstrapCI(
    results.map((r) => r.scores.lexical.recall10),
    results.map((r) => r.scores.hybrid.recall10),
    { resamples: RESAMPLES, seed: SEED },
  );
  const types = [...new Set(results.map((r) => r.type))].sort();
  emit({
    questions: results.length,
    lexical: contract(arm('lexical')),
    hybrid: contract(arm('hybrid')),
    diffRecall10CI: ci.map((x) => round(x, 4)),
    skipped: measured.skipped,
    model: embedder.model,
    turns: measured.turns,
    semanticDepth: depth,
    relevance: {
      foundAtSpreads: FOUND_AT_SPREADS,
      fullAtSpreads: FULL_AT_SPREADS,
      backgroundSample: BACKGROUND_SAMPLE,
    },
    lexicalWeight: LEXICAL_WEIGHT,
    bootstrap: { resamples: RESAMPLES, seed: SEED, level: 0.95 },
    arms: Object.fromEntries(ARMS.map((a) => [a, arm(a)])),
    perType: Object.fromEntries(
      types.map((type) => {
        const rows = results.filter((r) => r.type === type);
        return [
          type,
          {
            questions: rows.length,
            ...Object.fromEntries(ARMS.map((a) => [a, contract(average(rows.map((r) => r.scores[a])))])),
          },
        ];
      }),
    ),
    paraphrase: paraphrases,
    paper: PAPER,
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
