/**
 * Embeddings kept across runs of the retrieval benchmark and the audit's hybrid ranker, so a
 * rerun (or a run resumed after a kill) embeds only what it has not seen. One append-only
 * file per model in the folder given (`<cacheDir>/embeddings/`: `embeddingCacheDir`);
 * each record is a key (sha256 of model, use and text) and the unit vector as float32
 * little-endian. A run killed mid-write leaves a torn last record, cut off on the next load;
 * so one run at a time fills a model's file (a second would see the first's writes as torn).
 */
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { ModelError } from '../core/errors';
import type { Embedder, EmbeddingUse } from './embedder';

const KEY_BYTES = 32;

/**
 * Texts per request and per append: a kill loses at most one batch of work, and a batch of
 * long turns stays well inside a request timeout on a small shared machine.
 */
export const CACHE_BATCH = 16;

/** Tries per batch: a long fill should outlast a transient server hiccup, not a dead server. */
const TRIES = 4;

export interface EmbeddingCache {
  readonly file: string;
  /** Vectors held (from earlier runs and this one). */
  readonly size: number;
  get(use: EmbeddingUse, text: string): Float32Array | undefined;
  /**
   * Embed the texts not held yet, in batches, appending each batch as it arrives; returns
   * how many were embedded. `progress` hears the running count after each batch.
   */
  fill(
    embedder: Embedder,
    use: EmbeddingUse,
    texts: readonly string[],
    progress?: (done: number, missing: number) => void,
  ): Promise<number>;
  close(): void;
}

function cacheKey(model: string, use: EmbeddingUse, text: string): Buffer {
  // NUL separators: no model name or use can run into the text and collide with another key.
  return createHash('sha256').update(`${model}\0${use}\0${text}`).digest();
}

/** The model's file name: readable, with anything unsafe in a path replaced. */
function fileName(model: string, dimensions: number): string {
  return `${model.replace(/[^\w.-]/g, '_')}-${dimensions}.f32`;
}

/** Open (creating if need be) the cache of one model's vectors under `cacheDir`. */
export function openEmbeddingCache(dir: string, model: string, dimensions: number): EmbeddingCache {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, fileName(model, dimensions));
  const recordBytes = KEY_BYTES + 4 * dimensions;
  const fd = openSync(file, existsSync(file) ? 'r+' : 'w+');
  const vectors = new Map<string, Float32Array>();

  const size = fstatSync(fd).size;
  const whole = size - (size % recordBytes);
  if (whole !== size) ftruncateSync(fd, whole);
  const buf = Buffer.alloc(whole);
  for (let read = 0; read < whole;) read += readSync(fd, buf, read, whole - read, read);
  for (let at = 0; at < whole; at += recordBytes) {
    const v = new Float32Array(dimensions);
    for (let i = 0; i < dimensions; i++) v[i] = buf.readFloatLE(at + KEY_BYTES + 4 * i);
    vectors.set(buf.toString('hex', at, at + KEY_BYTES), v);
  }
  let end = whole;

  function append(keys: readonly Buffer[], vs: readonly Float32Array[]): void {
    const out = Buffer.alloc(keys.length * recordBytes);
    keys.forEach((key, r) => {
      const at = r * recordBytes;
      key.copy(out, at);
      vs[r]!.forEach((x, i) => out.writeFloatLE(x, at + KEY_BYTES + 4 * i));
    });
    for (let written = 0; written < out.length;)
      written += writeSync(fd, out, written, out.length - written, end + written);
    end += out.length;
  }

  async function embedWithRetry(embedder: Embedder, batch: string[], use: EmbeddingUse) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await embedder.embed(batch, use);
      } catch (err) {
        if (!(err instanceof ModelError) || !err.retryable || attempt >= TRIES) throw err;
        await new Promise((r) => setTimeout(r, 1000 * 2 ** attempt));
      }
    }
  }

  return {
    file,
    get size() {
      return vectors.size;
    },
    get(use, text) {
      return vectors.get(cacheKey(model, use, text).toString('hex'));
    },
    async fill(embedder, use, texts, progress) {
      if (embedder.model !== model || embedder.dimensions !== dimensions) {
        throw new ModelError(
          `the embedder serves ${embedder.model} (${embedder.dimensions} dimensions); this cache holds ${model} (${dimensions})`,
          false,
        );
      }
      const missing = [...new Set(texts)].filter(
        (t) => !vectors.has(cacheKey(model, use, t).toString('hex')),
      );
      for (let start = 0; start < missing.length; start += CACHE_BATCH) {
        const batch = missing.slice(start, start + CACHE_BATCH);
        const vs = await embedWithRetry(embedder, batch, use);
        const keys = batch.map((t) => cacheKey(model, use, t));
        append(keys, vs);
        keys.forEach((k, i) => vectors.set(k.toString('hex'), vs[i]!));
        progress?.(start + batch.length, missing.length);
      }
      return missing.length;
    },
    close() {
      closeSync(fd);
    },
  };
}
