import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { atoms } from '../../core/atoms';

/**
 * The fact atoms (core/atoms.ts), after their patterns were made linear in the text (money by
 * currency name now starts only where a number starts; trailing marks of names are trimmed
 * by a loop): what they find is unchanged. Their cost on adversarial text is measured by
 * `npm run bench -- atoms`, and the regexp lint rules refuse super-linear patterns.
 */
const CURRENCIES = { usd: 'USD', eur: 'EUR', gbp: 'GBP', dollars: 'USD', euros: 'EUR', pounds: 'GBP' };

describe('atoms (fast-check)', () => {
  it('finds an amount with a currency name after text that is not part of a number', () => {
    fc.assert(
      fc.property(
        fc
          .array(fc.constantFrom('we', 'paid', 'about', 'fee', '(', ':', '-', 'x'), { maxLength: 5 })
          .map((w) => w.join(' ')),
        fc.integer({ min: 1, max: 9_999_999 }),
        fc.constantFrom(...(Object.keys(CURRENCIES) as (keyof typeof CURRENCIES)[])),
        fc.boolean(),
        (before, amount, currency, grouped) => {
          const written = grouped ? amount.toLocaleString('en-US') : String(amount);
          const found = atoms(`${before} ${written} ${currency} today`);
          expect(found).toContain(`money:${CURRENCIES[currency]}:${amount}`);
        },
      ),
    );
  });

  it('names keep their words without trailing dots or apostrophes', () => {
    expect(atoms('We met Acme Corp.')).toContain('name:acme corp');
    expect(atoms("We saw Initech Inc.'")).toContain('name:initech inc');
    expect(atoms('Notes from Globex Ltd...')).toContain('name:globex ltd');
  });

  it('an adversarial run of digits and commas yields one number, not one per position', () => {
    const found = atoms('1,'.repeat(4_000) + 'usd');
    expect(found.filter((a) => a.startsWith('money:') || a.startsWith('num:'))).toHaveLength(1);
  });
});
