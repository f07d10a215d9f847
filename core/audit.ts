/**
 * Classification of the restore-counterfactual audit (design section 7). Pure: the audit
 * activities feed it reader verdicts, it sorts each question into a bin, and it summarises
 * bins with an irreversible share and a seeded bootstrap interval.
 */

/**
 * - `excluded`: the reader fails even with the clean gold, so the question says nothing
 *   about eviction (the denominator filter);
 * - `correct`: answered right under the policy;
 * - `irreversible`: restoring the gold flips it and some gold had been evicted;
 * - `recoverable`: restoring flips it though all gold was still there (retrieval missed it);
 * - `residual`: restoring does not flip it (the reader failed with the evidence in hand).
 */
export type AuditBin = 'excluded' | 'correct' | 'irreversible' | 'recoverable' | 'residual';

export interface QuestionVerdicts {
  /** The reader answers correctly when handed only the clean gold. */
  cleanGold: boolean;
  /** Correct with the policy's read context. */
  policy: boolean;
  /** Correct with the same context plus the restored gold. */
  restored: boolean;
  /** Gold units the read setting can no longer reach. */
  goldEvicted: number;
}

export interface Classification {
  bin: AuditBin;
  /** acc(restored) - acc(policy), in {-1, 0, 1}. */
  restoreGainRaw: -1 | 0 | 1;
  /** The raw gain with -1 clipped to 0: a restore that hurts is never evidence of destruction. */
  restoreGain: 0 | 1;
}

export function classify(v: QuestionVerdicts): Classification {
  const restoreGainRaw = ((v.restored ? 1 : 0) - (v.policy ? 1 : 0)) as -1 | 0 | 1;
  const restoreGain = restoreGainRaw === 1 ? 1 : 0;
  let bin: AuditBin;
  if (!v.cleanGold) bin = 'excluded';
  else if (v.policy) bin = 'correct';
  else if (restoreGain === 0) bin = 'residual';
  else bin = v.goldEvicted > 0 ? 'irreversible' : 'recoverable';
  return { bin, restoreGainRaw, restoreGain };
}

export interface BinCounts {
  questions: number;
  /** Questions the reader answers with the clean gold: the base of every rate. */
  denominator: number;
  errors: number;
  irreversible: number;
  recoverable: number;
  residual: number;
  /** Questions in the denominator whose restore lowered accuracy (clipped to 0). */
  negativeRestores: number;
}

export function tally(items: Classification[]): BinCounts {
  const c: BinCounts = {
    questions: items.length,
    denominator: 0,
    errors: 0,
    irreversible: 0,
    recoverable: 0,
    residual: 0,
    negativeRestores: 0,
  };
  for (const { bin, restoreGainRaw } of items) {
    if (bin === 'excluded') continue;
    c.denominator++;
    if (restoreGainRaw === -1) c.negativeRestores++;
    if (bin === 'correct') continue;
    c.errors++;
    c[bin]++;
  }
  return c;
}

/**
 * Irreversible over flipped errors, irreversible / (irreversible + recoverable): of the
 * errors the gold would fix, the part whose evidence was gone. Undefined without flips.
 */
export function irreversibleShare(c: Pick<BinCounts, 'irreversible' | 'recoverable'>): number | null {
  const flipped = c.irreversible + c.recoverable;
  return flipped === 0 ? null : c.irreversible / flipped;
}

/** A deterministic PRNG in [0, 1) (mulberry32) seeded by a string (FNV-1a). */
export function seededRandom(seed: string): () => number {
  let h = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) h = Math.imul(h ^ seed.charCodeAt(i), 0x01000193);
  let state = h >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Interval {
  low: number;
  high: number;
}

/**
 * Percentile bootstrap of the irreversible share over questions: resample the denominator
 * with replacement, keep resamples that have a flipped error, take the 2.5th and 97.5th
 * percentiles. Deterministic for a seed; null when no question flipped.
 */
export function bootstrapShareInterval(
  items: Classification[],
  opts: { seed: string; resamples?: number; level?: number },
): Interval | null {
  const bins = items.filter((i) => i.bin !== 'excluded').map((i) => i.bin);
  if (irreversibleShare(tally(items)) === null) return null;
  const random = seededRandom(opts.seed);
  const resamples = opts.resamples ?? 2000;
  const shares: number[] = [];
  for (let r = 0; r < resamples; r++) {
    let irreversible = 0;
    let recoverable = 0;
    for (let i = 0; i < bins.length; i++) {
      const bin = bins[Math.floor(random() * bins.length)];
      if (bin === 'irreversible') irreversible++;
      else if (bin === 'recoverable') recoverable++;
    }
    const share = irreversibleShare({ irreversible, recoverable });
    if (share !== null) shares.push(share);
  }
  shares.sort((a, b) => a - b);
  const tail = (1 - (opts.level ?? 0.95)) / 2;
  const at = (q: number) => shares[Math.min(shares.length - 1, Math.max(0, Math.floor(q * shares.length)))]!;
  return { low: at(tail), high: at(1 - tail) };
}
