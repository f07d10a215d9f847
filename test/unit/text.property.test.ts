import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { termSequence, terms } from '../../core/text';

/**
 * Lexical normalisation (core/text.ts): compatibility forms (mathematical letters, full-width
 * forms) fold to their plain letters before case does, so a styled word is the same term as
 * its plain spelling, and a term never keeps a capital.
 */
const MATH_BOLD_CAPITAL_A = 0x1d400;
const MATH_BOLD_SMALL_A = 0x1d41a;
const FULL_WIDTH_CAPITAL_A = 0xff21;

/** `word` in mathematical bold, or full-width, capitals and small letters alike. */
function styled(word: string, style: 'bold' | 'fullWidth'): string {
  return [...word]
    .map((ch) => {
      const upper = ch >= 'A' && ch <= 'Z';
      const offset = ch.toLowerCase().charCodeAt(0) - 97;
      if (style === 'fullWidth')
        return String.fromCodePoint((upper ? FULL_WIDTH_CAPITAL_A : 0xff41) + offset);
      return String.fromCodePoint((upper ? MATH_BOLD_CAPITAL_A : MATH_BOLD_SMALL_A) + offset);
    })
    .join('');
}

const word = fc.stringMatching(/^[A-Za-z]{6,12}$/);

describe('lexical normalisation (fast-check)', () => {
  it('a styled word is the same term as its plain spelling', () => {
    expect(terms('𝐇𝐞𝐥𝐥𝐨 world')).toEqual(terms('hello world'));
    fc.assert(
      fc.property(word, fc.constantFrom('bold' as const, 'fullWidth' as const), (w, style) => {
        expect(termSequence(styled(w, style))).toEqual(termSequence(w));
      }),
    );
  });

  it('no term holds a capital letter', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (text) => {
        for (const t of termSequence(text)) expect(t).toBe(t.toLowerCase());
      }),
    );
  });
});
