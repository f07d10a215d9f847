import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { leastBusy } from '../../llm/embedder';

/**
 * Which query endpoint a query goes to (docs/serving.md, Embeddings in two lanes): one with
 * the fewest of the process's queries in flight, the first of those, so a quiet process sends
 * every query to the first listed.
 */
describe('leastBusy', () => {
  const pool = fc
    .uniqueArray(fc.constantFrom<string>('a', 'b', 'c', 'd', 'e', 'f'), { minLength: 1, maxLength: 6 })
    .chain((urls) =>
      fc.tuple(
        fc.constant(urls),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: urls.length, maxLength: urls.length }),
      ),
    );

  it('picks the first of the endpoints with the fewest in flight', () => {
    fc.assert(
      fc.property(pool, ([urls, counts]) => {
        // Zero is left out of the map, as the embedder leaves it.
        const inFlight = new Map(urls.flatMap((u, i) => (counts[i]! > 0 ? [[u, counts[i]!] as const] : [])));
        const chosen = leastBusy(urls, inFlight);
        const fewest = Math.min(...counts);
        expect(counts[urls.indexOf(chosen)]).toBe(fewest);
        expect(urls.indexOf(chosen)).toBe(counts.indexOf(fewest));
      }),
    );
  });

  it('sends every query of a quiet process to the first', () => {
    expect(leastBusy(['a', 'b'], new Map())).toBe('a');
    expect(leastBusy(['a', 'b'], new Map([['a', 1]]))).toBe('b');
    expect(
      leastBusy(
        ['a', 'b'],
        new Map([
          ['a', 1],
          ['b', 1],
        ]),
      ),
    ).toBe('a');
  });
});
