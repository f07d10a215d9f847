import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  armPolicy,
  bootstrapShareInterval,
  classify,
  irreversibleShare,
  tally,
  type Classification,
  type QuestionVerdicts,
} from '../../audit/records';
import { seededRandom, seedOf } from '../../core/seededRandom';

const verdicts = (v: Partial<QuestionVerdicts>): QuestionVerdicts => ({
  cleanGold: true,
  policy: false,
  restored: true,
  goldDeleted: 0,
  ...v,
});

describe('restore-counterfactual classification', () => {
  it('a wrong answer that restoring the gold fixes, with gold deleted, is irreversible', () => {
    expect(classify(verdicts({ goldDeleted: 1 }))).toEqual({
      bin: 'irreversible',
      restoreGainRaw: 1,
      restoreGain: 1,
    });
  });

  it('a wrong answer that restoring fixes while every gold unit survived is recoverable', () => {
    expect(classify(verdicts({ goldDeleted: 0 })).bin).toBe('recoverable');
  });

  it('a wrong answer that restoring does not fix is residual, evicted gold or not', () => {
    expect(classify(verdicts({ restored: false, goldDeleted: 2 }))).toEqual({
      bin: 'residual',
      restoreGainRaw: 0,
      restoreGain: 0,
    });
    expect(classify(verdicts({ restored: false })).bin).toBe('residual');
  });

  it('a restore that breaks a right answer is clipped to 0 and never counted as destruction', () => {
    const c = classify(verdicts({ policy: true, restored: false, goldDeleted: 1 }));
    expect(c).toEqual({ bin: 'correct', restoreGainRaw: -1, restoreGain: 0 });
    const counts = tally([c]);
    expect(counts).toMatchObject({ denominator: 1, errors: 0, irreversible: 0, negativeRestores: 1 });
  });

  it('the denominator keeps only questions the reader answers with the clean gold', () => {
    const excluded = classify(verdicts({ cleanGold: false, goldDeleted: 3 }));
    expect(excluded.bin).toBe('excluded');
    const counts = tally([
      excluded,
      classify(verdicts({ goldDeleted: 1 })),
      classify(verdicts({ policy: true })),
      classify(verdicts({ restored: false })),
      classify(verdicts({})),
    ]);
    expect(counts).toEqual({
      questions: 5,
      denominator: 4,
      errors: 3,
      irreversible: 1,
      recoverable: 1,
      residual: 1,
      negativeRestores: 0,
    });
    expect(irreversibleShare(counts)).toBe(0.5);
  });

  it('bins partition the denominator and the gain is always in {-1, 0, 1}', () => {
    const v = fc.record({
      cleanGold: fc.boolean(),
      policy: fc.boolean(),
      restored: fc.boolean(),
      goldDeleted: fc.nat(5),
    });
    fc.assert(
      fc.property(fc.array(v), (all) => {
        const items = all.map(classify);
        const c = tally(items);
        expect(c.errors).toBe(c.irreversible + c.recoverable + c.residual);
        expect(c.denominator).toBe(all.filter((x) => x.cleanGold).length);
        for (const i of items) {
          expect([-1, 0, 1]).toContain(i.restoreGainRaw);
          expect(i.restoreGain).toBe(Math.max(0, i.restoreGainRaw));
        }
        // Destruction needs evicted gold and a restore that helps.
        items.forEach((i, k) => {
          if (i.bin === 'irreversible') expect(all[k]!.goldDeleted > 0 && all[k]!.restored).toBe(true);
        });
      }),
    );
  });
});

describe('irreversible share and its bootstrap interval', () => {
  const bins = (irreversible: number, recoverable: number, residual: number, correct: number) =>
    [
      ...Array(irreversible).fill(verdicts({ goldDeleted: 1 })),
      ...Array(recoverable).fill(verdicts({})),
      ...Array(residual).fill(verdicts({ restored: false })),
      ...Array(correct).fill(verdicts({ policy: true })),
    ].map(classify) as Classification[];

  it('is irreversible over flipped errors, undefined without flips', () => {
    expect(irreversibleShare(tally(bins(55, 22, 47, 0)))).toBeCloseTo(0.714, 3);
    expect(irreversibleShare(tally(bins(0, 0, 4, 10)))).toBeNull();
    expect(bootstrapShareInterval(bins(0, 0, 4, 10), { seed: 's' })).toBeNull();
  });

  it('is deterministic for a seed and brackets the point estimate', () => {
    const items = bins(12, 8, 5, 11);
    const a = bootstrapShareInterval(items, { seed: 'row' });
    expect(a).toEqual(bootstrapShareInterval(items, { seed: 'row' }));
    const share = irreversibleShare(tally(items))!;
    expect(a!.low).toBeLessThanOrEqual(share);
    expect(a!.high).toBeGreaterThanOrEqual(share);
    expect(a!.low).toBeLessThan(a!.high);
  });

  it('collapses to 1.00 when every flipped error is irreversible', () => {
    expect(bootstrapShareInterval(bins(9, 0, 3, 4), { seed: 'x' })).toEqual({ low: 1, high: 1 });
  });

  it('draws the same PRNG sequence for a seed, a different one for another', () => {
    const a = seededRandom(seedOf('a'));
    const a2 = seededRandom(seedOf('a'));
    const b = seededRandom(seedOf('b'));
    const xs = [a(), a(), a()];
    expect([a2(), a2(), a2()]).toEqual(xs);
    expect([b(), b(), b()]).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
  });
});

describe('arms', () => {
  it('names the policy of every arm, with the seed of a random one', () => {
    expect(armPolicy('random-3')).toEqual({ policy: 'random', seed: 3 });
    expect(armPolicy('memgate')).toEqual({ policy: 'memgate' });
    expect(armPolicy('gold-control')).toEqual({ policy: 'gold-control' });
  });
});
