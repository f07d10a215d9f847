import { vectorDefect } from '../core/vectorDefects';
import OpenAI from 'openai';
import { Admission, AdmissionTimeout } from '../core/admission';
import { ModelError } from '../core/errors';
import { modelError } from './openai';

/**
 * Text to vectors on any OpenAI-compatible embeddings endpoint (OpenAI, a self-hosted server,
 * the stack's local one). Asymmetric models (e5, Cohere, Voyage) embed a query and a passage
 * differently: the endpoint is told which by `input_type`, by a configured prefix, or both.
 */
export interface EmbedderSettings {
  /**
   * Where queries are embedded, the same model at each: a recall waits on them, so each goes to
   * the one with the fewest of this process's queries in flight (`queriesInFlight`).
   */
  queryBaseURLs: readonly string[];
  /** Where passages are embedded: background work, held apart so it never delays a query. */
  passagesBaseURL: string;
  apiKey: string;
  model: string;
  dimensions: number;
  queryPrefix: string;
  passagePrefix: string;
  /** Send `input_type` (query or passage); OpenAI's own API rejects the field. */
  sendInputType: boolean;
  timeoutMs: number;
  /** Requests of passages this process has in flight at the endpoint at once (`passageSlots`). */
  passagesInFlight: number;
}

export type EmbeddingUse = 'query' | 'passage';

export interface Embedder {
  /** The model the vectors come from: stored beside each vector, so a change of model is seen. */
  readonly model: string;
  readonly dimensions: number;
  /** One unit-length vector per text, in order. */
  embed(texts: readonly string[], use: EmbeddingUse): Promise<Float32Array[]>;
}

/** Texts per request: big enough to amortise the round trip, small enough to stay under timeouts. */
export const EMBED_BATCH = 32;

/**
 * Characters per request, of all its texts together (a text longer than this goes alone): a
 * model's time grows with the text, so 32 turns of 4,000 characters outlast the request
 * timeout on the local default, and a request that always times out embeds nothing however
 * often it is tried (docs/benchmarks.md, bench/embeddings). About 4,000 tokens, far below
 * what hosted endpoints take in one request.
 */
export const EMBED_REQUEST_CHARS = 16_000;

/**
 * The texts split into requests, in order: each at most `EMBED_BATCH` texts and, unless it is
 * one text, at most `EMBED_REQUEST_CHARS` characters.
 */
export function requestBatches<T extends string>(texts: readonly T[]): T[][] {
  const batches: T[][] = [];
  let current: T[] = [];
  let chars = 0;
  for (const text of texts) {
    if (current.length > 0 && (current.length === EMBED_BATCH || chars + text.length > EMBED_REQUEST_CHARS)) {
      batches.push(current);
      current = [];
      chars = 0;
    }
    current.push(text);
    chars += text.length;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** Scaled to unit length, so a dot product is the cosine similarity. */
export function normalised(v: ArrayLike<number>): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i]! * v[i]!;
  const norm = Math.sqrt(sum);
  const out = new Float32Array(v.length);
  if (norm === 0) return out;
  for (let i = 0; i < v.length; i++) out[i] = v[i]! / norm;
  return out;
}

/**
 * Passages wait their turn in the process, not at the endpoint. Sent all at once (every
 * write's embedding and every night's embed phase of a worker), they queue at a server that
 * is busy, each times out there while it waits, and the server still embeds what nobody reads
 * any more: the more is sent, the less is done. Held here, a request's timeout counts the
 * endpoint's own time. Queries (one text, a recall waiting) go straight out, to an endpoint
 * of their own when one is configured. One budget per endpoint (and size) for the whole
 * process, whichever embedder spends it.
 */
const passageSlots = new Map<string, Admission>();

/**
 * This process's queries in flight, per query endpoint, whichever embedder sent them. A server
 * that embeds one request at a time (the local stack's) makes a query that reaches it while it
 * is busy wait for the one under way, so a query goes where the fewest are: with one agent's
 * queries sent one at a time (client/client.ts, `embedQuery`) and two servers, an agent that
 * recalls without pause holds one, and another agent's query finds the other free
 * (docs/serving.md, Embeddings in two lanes). Ties go to the first listed, so a quiet process
 * uses one.
 */
const queriesInFlight = new Map<string, number>();

/** Of `urls`, the one with the fewest of this process's queries in flight; the first of equals. */
export function leastBusy(urls: readonly string[], inFlight: ReadonlyMap<string, number>): string {
  let best = urls[0]!;
  for (const url of urls) if ((inFlight.get(url) ?? 0) < (inFlight.get(best) ?? 0)) best = url;
  return best;
}

/** The longest a batch of passages waits for its turn before it fails, retryable. */
const PASSAGE_WAIT_MS = 10 * 60_000;

function slotsFor(s: EmbedderSettings): Admission {
  const key = `${s.passagesInFlight} ${s.passagesBaseURL}`;
  let slots = passageSlots.get(key);
  if (!slots) passageSlots.set(key, (slots = new Admission(s.passagesInFlight)));
  return slots;
}

export function openAIEmbedder(s: EmbedderSettings): Embedder {
  // Retries belong to the caller's policy (a Temporal activity, the recall path's fallback).
  const client = (baseURL: string) =>
    new OpenAI({ baseURL, apiKey: s.apiKey, timeout: s.timeoutMs, maxRetries: 0 });
  const clients = new Map<string, OpenAI>();
  const clientOf = (baseURL: string) => {
    let c = clients.get(baseURL);
    if (!c) clients.set(baseURL, (c = client(baseURL)));
    return c;
  };
  const slots = slotsFor(s);
  const send = async (body: OpenAI.Embeddings.EmbeddingCreateParams, use: EmbeddingUse) => {
    if (use === 'query') {
      const url = leastBusy(s.queryBaseURLs, queriesInFlight);
      queriesInFlight.set(url, (queriesInFlight.get(url) ?? 0) + 1);
      try {
        return await clientOf(url).embeddings.create(body);
      } finally {
        const left = queriesInFlight.get(url)! - 1;
        if (left === 0) queriesInFlight.delete(url);
        else queriesInFlight.set(url, left);
      }
    }
    let release: () => void;
    try {
      release = await slots.acquire(1, Date.now() + PASSAGE_WAIT_MS);
    } catch (err) {
      if (!(err instanceof AdmissionTimeout)) throw err;
      throw new ModelError(
        `no turn at the embeddings endpoint within ${err.waitedMs} ms: ${s.passagesInFlight} requests of this process were in flight all along`,
        true,
      );
    }
    try {
      return await clientOf(s.passagesBaseURL).embeddings.create(body);
    } finally {
      release();
    }
  };
  return {
    model: s.model,
    dimensions: s.dimensions,
    async embed(texts, use) {
      const out: Float32Array[] = [];
      const prefix = use === 'query' ? s.queryPrefix : s.passagePrefix;
      for (const batch of requestBatches(texts)) {
        const start = out.length;
        const input = batch.map((t) => prefix + t);
        let data: OpenAI.Embeddings.Embedding[];
        try {
          const body: OpenAI.Embeddings.EmbeddingCreateParams & { input_type?: EmbeddingUse } = {
            model: s.model,
            input,
            // Asked for by name: unasked, the client asks for base64 and decodes whatever comes
            // back as base64, and servers that always answer floats (Ollama, LM Studio) are
            // read as a quarter as many numbers.
            encoding_format: 'float',
          };
          if (s.sendInputType) body.input_type = use;
          data = (await send(body, use)).data;
        } catch (err) {
          throw modelError(err);
        }
        if (!Array.isArray(data) || data.some((d) => !Array.isArray(d?.embedding))) {
          throw new ModelError('the embeddings endpoint answered without a vector for every text', true);
        }
        if (data.length !== input.length) {
          throw new ModelError(
            `the embeddings endpoint returned ${data.length} vectors for ${input.length} texts`,
            true,
          );
        }
        for (const d of [...data].sort((a, b) => a.index - b.index)) {
          // A wrong size is a wrong model or endpoint: no retry makes it fit.
          if (d.embedding.length !== s.dimensions) {
            throw new ModelError(
              `the embeddings endpoint returned ${d.embedding.length} dimensions; ${s.model} is configured with ${s.dimensions}`,
              false,
              { model: s.model, expected: s.dimensions, received: d.embedding.length },
            );
          }
          const defect = vectorDefect(d.embedding, s.dimensions);
          // A vector with no direction, or none a number, compares with nothing; retried, the
          // same text may come back usable, so the caller may try again.
          if (defect) {
            throw new ModelError(
              `the embeddings endpoint returned an unusable vector (${defect}) for text ${start + d.index}`,
              true,
              { model: s.model, defect },
            );
          }
          out.push(normalised(d.embedding));
        }
      }
      return out;
    },
  };
}
