import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { embeddedQueryOf, QUERY_EMBEDDING_TOKENS } from '../../core/recall';

/** The estimate the bound is in: a quarter of a token per ASCII character, one per other. */
const estimate = (text: string) => [...text].reduce((n, ch) => n + (ch.charCodeAt(0) < 0x80 ? 0.25 : 1), 0);

const queryArb = fc.string({
  unit: fc.constantFrom('a', 'b', 'z', ' ', '?', '\u4e00', '\u4e01', 'é', '\u{1d407}'),
  maxLength: 1_200,
});

describe('the part of a query that is embedded', () => {
  it('is a beginning of the query within the token bound, and the whole query when it fits', () => {
    fc.assert(
      fc.property(queryArb, (query) => {
        const embedded = embeddedQueryOf(query);
        expect(query.startsWith(embedded)).toBe(true);
        expect(estimate(embedded)).toBeLessThanOrEqual(QUERY_EMBEDDING_TOKENS);
        if (estimate(query) <= QUERY_EMBEDDING_TOKENS) expect(embedded).toBe(query);
      }),
    );
  });

  it('is cut at a space when the part that fits has one', () => {
    fc.assert(
      fc.property(queryArb, (query) => {
        const embedded = embeddedQueryOf(query);
        if (embedded === query || !/\s/.test(embedded)) return;
        expect(query.slice(embedded.length)).toMatch(/^\s/);
      }),
    );
  });

  it('keeps a question of a paragraph whole and bounds a query of 4,000 CJK characters', () => {
    const question =
      'I was going through our previous conversation about the impact of the political climate in Catalonia on its literature and music. Can you remind me of the example you gave of a Spanish-Catalan singer-songwriter who supports unity between Catalonia and Spain?';
    expect(embeddedQueryOf(question)).toBe(question);
    const long = Array.from({ length: 2_000 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join(' ');
    const embedded = embeddedQueryOf(long);
    expect(embedded.length).toBeLessThan(long.length / 10);
    expect(long.startsWith(`${embedded} `)).toBe(true);
  });
});
