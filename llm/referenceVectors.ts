import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REFERENCE_PASSAGES } from '../core/referencePassages';
import { vectorDefect } from '../core/vectorDefects';
import type { Embedder } from './embedder';

/**
 * The reference passages' vectors (core/referencePassages.ts) of one model, kept in `dir`
 * once embedded: a process that starts answers its first hybrid recall without embedding
 * them again (48 passages take the local model about a second on two busy cores). The
 * file's name holds the model, the dimensions and a digest of the passages, so another of
 * any of them embeds anew; a file that does not hold a usable vector per passage is
 * replaced.
 */
export async function referenceVectors(embedder: Embedder, dir: string): Promise<Float32Array[]> {
  const digest = createHash('sha256')
    .update(JSON.stringify([embedder.model, embedder.dimensions, REFERENCE_PASSAGES]))
    .digest('base64url')
    .slice(0, 22);
  const file = join(dir, `reference-${digest}.json`);
  const kept = read(file, embedder.dimensions);
  if (kept) return kept;
  const vectors = await embedder.embed([...REFERENCE_PASSAGES], 'passage');
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${file}.tmp`, JSON.stringify(vectors.map((v) => Array.from(v))));
    renameSync(`${file}.tmp`, file);
  } catch {
    // Not kept: the next process embeds them again.
  }
  return vectors;
}

function read(file: string, dimensions: number): Float32Array[] | undefined {
  try {
    const rows = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    if (!Array.isArray(rows) || rows.length !== REFERENCE_PASSAGES.length) return undefined;
    const vectors = rows.map((r) => Float32Array.from(r as number[]));
    return vectors.every((v) => !vectorDefect(v, dimensions)) ? vectors : undefined;
  } catch {
    return undefined;
  }
}
