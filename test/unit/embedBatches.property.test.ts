import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EMBED_BATCH, EMBED_REQUEST_CHARS, requestBatches } from '../../llm/embedder';

/**
 * How the embedder splits texts into requests: bounded in count and in characters, so a
 * request of long texts does not outlast the request timeout (docs/benchmarks.md,
 * bench/embeddings), in order, and no smaller than the bounds make it.
 */
describe('requestBatches', () => {
  const length = fc.oneof(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 1_000, max: 20_000 }));
  const texts = fc.array(
    length.map((n) => 'x'.repeat(n)),
    { maxLength: 120 },
  );
  const chars = (batch: readonly string[]) => batch.reduce((sum, t) => sum + t.length, 0);

  it('keeps every text once, in order, within both bounds unless it goes alone', () => {
    fc.assert(
      fc.property(texts, (all) => {
        const batches = requestBatches(all);
        expect(batches.flat()).toEqual(all);
        for (const batch of batches) {
          expect(batch.length).toBeGreaterThanOrEqual(1);
          expect(batch.length).toBeLessThanOrEqual(EMBED_BATCH);
          if (batch.length > 1) expect(chars(batch)).toBeLessThanOrEqual(EMBED_REQUEST_CHARS);
        }
      }),
    );
  });

  it('sends no request smaller than it must: the next text would break a bound', () => {
    fc.assert(
      fc.property(texts, (all) => {
        const batches = requestBatches(all);
        for (let i = 0; i + 1 < batches.length; i++) {
          const next = batches[i + 1]![0]!;
          const full = batches[i]!.length === EMBED_BATCH;
          expect(full || chars(batches[i]!) + next.length > EMBED_REQUEST_CHARS).toBe(true);
        }
      }),
    );
  });

  it('splits 32 turns of 4,000 characters, which outlast a request timeout together', () => {
    const batches = requestBatches(Array.from({ length: 32 }, () => 'x'.repeat(4_000)));
    expect(batches.map((b) => b.length)).toEqual([4, 4, 4, 4, 4, 4, 4, 4]);
    // Short texts still go 32 at a time.
    expect(requestBatches(Array.from({ length: 64 }, () => 'a short note')).map((b) => b.length)).toEqual([
      32, 32,
    ]);
  });
});
