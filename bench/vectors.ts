/**
 * Vectors for benchmark stores, as the agents' workflows leave them. Embedding hundreds of
 * thousands of entries would take this kind of machine days, so each entry's vector is a real
 * embedding of a LongMemEval user turn (`BENCH_RECALL_BASE_VECTORS` of them, embedded once by
 * the stack's embeddings server and cached by content and model) perturbed by Gaussian noise to
 * a cosine of about 0.9 with its original: the clustered shape of real text's embeddings, at
 * the benchmark's scale.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { listQuestions, loadQuestion } from '../audit/longMemEval';
import type { Entry, Tier } from '../core/entry';
import { recallStateOf } from '../core/recall';
import type { VectorRecord } from '../store/db';
import { encodeVector, feedKey, textHash } from '../store/vectors';
import { createEmbedder } from '../llm';
import { openEmbeddingCache } from '../llm/embeddingCache';
import { embeddingCacheDir } from '../stack/stack';
import type { BenchEnv } from './support';

const BASE_VECTORS = Number(process.env.BENCH_RECALL_BASE_VECTORS ?? 2000);
const DATA =
  process.env.BENCH_RETRIEVAL_DATA ?? resolve(__dirname, '..', '..', 'shared', 'data', 'longmemeval-s');
/** Per-dimension noise that leaves a perturbed unit vector at cosine ≈ 0.9 with its base (384 dimensions). */
const NOISE = Math.sqrt((1 / 0.81 - 1) / 384);

/** Deterministic pseudo-random numbers, so every run loads the same store. */
export function prng(seed: number) {
  return () => {
    seed = (seed * 1664525 + 1013904223) >>> 0;
    return seed / 2 ** 32;
  };
}

function gaussian(rand: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

/** Texts whose real embeddings seed the bench's vectors: the user turns of the LongMemEval sample. */
function baseTexts(): string[] {
  if (!existsSync(DATA))
    throw new Error(`no LongMemEval data at ${DATA} (BENCH_RETRIEVAL_DATA names another folder)`);
  const texts = new Set<string>();
  for (const ref of listQuestions(DATA)) {
    for (const session of loadQuestion(ref).haystack_sessions) {
      for (const turn of session) if (turn.role === 'user') texts.add(turn.content);
      if (texts.size >= BASE_VECTORS) return [...texts];
    }
  }
  return [...texts];
}

export interface BaseVectors {
  model: string;
  dimensions: number;
  /** The base texts, and their embeddings in the same order. */
  texts: string[];
  vectors: Float32Array[];
  /** An entry's vector: a base, perturbed (deterministic given the calls before it). */
  perturbed(i: number): Float32Array;
}

/** The base vectors, embedded by the environment's embeddings server the first time and cached. */
export async function baseVectors(env: BenchEnv, name: string): Promise<BaseVectors> {
  if (!('queryUrls' in env.endpoints.embeddings)) {
    throw new Error(`${name} needs an embeddings endpoint: ${env.endpoints.embeddings.unavailable}`);
  }
  const embedder = createEmbedder(env.config, env.endpoints.embeddings);
  const cache = openEmbeddingCache(embeddingCacheDir(env.config), embedder.model, embedder.dimensions);
  const texts = baseTexts();
  await cache.fill(embedder, 'passage', texts, (done, missing) =>
    console.error(`[${name}] base vectors: embedded ${done}/${missing}`),
  );
  const vectors = texts.map((t) => cache.get('passage', t)!);
  cache.close();
  const rand = prng(7);
  return {
    model: embedder.model,
    dimensions: embedder.dimensions,
    texts,
    vectors,
    perturbed(i) {
      const base = vectors[i % vectors.length]!;
      const v = new Float32Array(base.length);
      let norm = 0;
      for (let d = 0; d < v.length; d++) {
        v[d] = base[d]! + NOISE * gaussian(rand);
        norm += v[d]! * v[d]!;
      }
      for (let d = 0; d < v.length; d++) v[d]! /= Math.sqrt(norm);
      return v;
    },
  };
}

/**
 * The vector records of entries as the embedding that gave them their vectors left them: the
 * entry's recall state beside its vector, and the agent's change numbers from `firstSeq` on.
 */
export function vectorRecords(
  bases: BaseVectors,
  agentId: string,
  entries: readonly { entry: Entry; tier: Tier }[],
  firstSeq: number,
  at: number,
): VectorRecord[] {
  return entries.map(({ entry, tier }, i) => {
    const seq = firstSeq + i;
    return {
      _id: entry._id,
      agentId,
      model: bases.model,
      dimensions: bases.dimensions,
      vector: encodeVector(bases.perturbed(seq - 1)),
      textHash: textHash(entry.text),
      recall: recallStateOf(entry, tier),
      seq,
      feedKey: feedKey(agentId, seq),
      at,
    };
  });
}
