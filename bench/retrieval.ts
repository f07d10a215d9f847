/**
 * Turn-level retrieval on LongMemEval-format questions: for each question, every turn of its
 * haystack (both roles) ranked for the question text, lexically (memgate's BM25 over the turns
 * sharing a term with it) and hybrid (the fusion of those scores with the similarities of
 * the `semanticDepth(10)` nearest turns above the similarity floor, as hybrid recall fuses
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
 */
import { join } from 'node:path';
import { listQuestions, loadQuestion, haystackTurns } from '../audit/longMemEval';
import { parseConfig, type Config } from '../core/config';
import { InvalidInputError, StackUnavailableError } from '../core/errors';
import { fuseScores, LEXICAL_WEIGHT, semanticDepth } from '../core/hybrid';
import { createEmbedder } from '../llm';
import type { Embedder } from '../llm/embedder';
import {
  embeddingCacheDir,
  embeddingsUp,
  endpoints,
  localEmbeddingsUnavailable,
  stackDown,
} from '../stack/stack';
import { openEmbeddingCache, type EmbeddingCache } from '../llm/embeddingCache';
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
 * The configured endpoint, else the local stack's embeddings server (started if need be, and
 * alone: the benchmark reads no store and runs no workflow). `started` says it is ours to stop.
 */
async function embeddingsEndpoint(config: Config): Promise<{ url: string; started: boolean }> {
  if (config.embeddingsUrl) return { url: config.embeddingsUrl, started: false };
  const started = await embeddingsUp(config, (line) => log(`[stack] ${line}`));
  const unavailable = localEmbeddingsUnavailable(config);
  if (unavailable) {
    throw new StackUnavailableError(
      `the hybrid arm needs embeddings: ${unavailable}; or set MEMGATE_EMBEDDINGS_URL`,
    );
  }
  return { url: endpoints(config).embeddingsUrl, started };
}

const ids = (ranking: readonly { id: string }[]) => ranking.map((r) => r.id);

interface Measured {
  results: { type: string; scores: Record<Arm, Scores> }[];
  skipped: number;
  turns: number;
}

/**
 * Question by question, embedding what is missing first: the cache fills in the order the
 * results are computed, so a killed run resumes where it stopped.
 */
async function measure(
  embedder: Embedder,
  cache: EmbeddingCache,
  depth: number,
  minSimilarity: number,
): Promise<Measured> {
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
    embedded += await cache.fill(embedder, 'query', [q.question]);
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
      cache.get('query', q.question)!,
      turns.map((t) => ({ id: t.unitId, vector: cache.get('passage', t.text)! })),
    );
    const similar = semantic.filter((s) => s.similarity >= minSimilarity).slice(0, depth);
    const hybrid = fuseScores(lexical, similar, minSimilarity).map((f) => f.id);
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

async function main() {
  // A longer request timeout than live recall's by default: a small machine embedding long
  // turns can take tens of seconds per batch, and a retry only queues the same work again.
  const config = parseConfig({ MEMGATE_OPENAI_TIMEOUT_MS: '120000', ...process.env });
  const endpoint = await embeddingsEndpoint(config);
  const embedder = createEmbedder(config, endpoint.url);
  const depth = semanticDepth(K);
  let measured: Measured;
  try {
    const cache = openEmbeddingCache(embeddingCacheDir(config), embedder.model, embedder.dimensions);
    log(`${cache.size} vectors cached in ${cache.file}`);
    try {
      measured = await measure(embedder, cache, depth, config.semanticMinSimilarity);
    } finally {
      cache.close();
    }
  } finally {
    if (endpoint.started) await stackDown(config, ['embeddings']);
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
    minSimilarity: config.semanticMinSimilarity,
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
    paper: PAPER,
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
