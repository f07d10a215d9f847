import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { seededRandom } from '../../core/seededRandom';

/**
 * Vectors whose stored bytes a test can look for in what an index persisted: entries k/64
 * for small integers k, exact in float16 (the engine's storage), so a vector's bytes on disk
 * are known without the engine's rounding.
 */
export function markerVector(seed: number, dimensions: number): Float32Array {
  const random = seededRandom(seed);
  return Float32Array.from({ length: dimensions }, () => (Math.floor(random() * 64) - 32) / 64 || 1 / 64);
}

/** A marker vector's float16 bytes. */
export function float16Bytes(v: Float32Array): Buffer {
  const out = Buffer.alloc(2 * v.length);
  v.forEach((x, i) => {
    const sign = x < 0 ? 0x8000 : 0;
    const a = Math.abs(x);
    const exponent = Math.floor(Math.log2(a));
    const mantissa = Math.round((a / 2 ** exponent - 1) * 1024);
    out.writeUInt16LE(sign | ((exponent + 15) << 10) | mantissa, 2 * i);
  });
  return out;
}

/** Every file persisted under `base` (vectorEngine/persisted.ts), concatenated. */
export function persistedBytes(base: string): Buffer {
  const dir = dirname(base);
  return Buffer.concat(
    readdirSync(dir)
      .filter((f) => f.startsWith(basename(base)))
      .map((f) => readFileSync(join(dir, f))),
  );
}

/** Whether any file under `dir` holds the vector's bytes. */
export function anyFileHolds(dir: string, v: Float32Array): boolean {
  const bytes = float16Bytes(v);
  return readdirSync(dir).some((f) => readFileSync(join(dir, f)).includes(bytes));
}
