import { seededRandom, seedOf } from '../core/seededRandom';

/**
 * Classification of the restore-counterfactual audit. Pure: the audit
 * activities feed it reader verdicts, it sorts each question into a bin, and it summarises
 * bins with an irreversible share and a seeded bootstrap interval.
 */

/**
 * - `excluded`: the reader fails even with the clean gold, so the question says nothing
 *   about eviction (the denominator filter);
 * - `correct`: answered right under the policy;
 * - `irreversible`: restoring the gold flips it and some gold had been deleted: the arm keeps
 *   it nowhere (design: the evidence was destroyed);
 * - `recoverable`: restoring flips it though all gold was still kept, reached by this read
 *   setting or not (spilled to cold, say): retrieval missed it;
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
  /** Gold units the arm keeps nowhere any more: deleted, not merely out of this read setting's reach. */
  goldDeleted: number;
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
  else bin = v.goldDeleted > 0 ? 'irreversible' : 'recoverable';
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
  const random = seededRandom(seedOf(opts.seed));
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

export type ReadCondition = 'forced-gold' | 'top-60';
export const READ_CONDITIONS: readonly ReadCondition[] = ['top-60', 'forced-gold'];

/** Which units a read can reach: what a classic policy retained, memgate's hot tier, or hot + cold. */
export type ReadSetting = 'retained' | 'hot' | 'hot+cold';

/** The arms, in the order they are run and reported; random runs under three seeds. */
export const AUDIT_ARMS = [
  'no-eviction',
  'fifo',
  'random-1',
  'random-2',
  'random-3',
  'redundancy',
  'importance',
  'gold-control',
  'memgate',
] as const;
export type AuditArm = (typeof AUDIT_ARMS)[number];

export type AuditPolicy =
  'no-eviction' | 'fifo' | 'random' | 'redundancy' | 'importance' | 'gold-control' | 'memgate';

/** An arm's eviction policy, and its seed for the random arms. */
export function armPolicy(arm: AuditArm): { policy: AuditPolicy; seed?: number } {
  const random = /^random-(\d+)$/.exec(arm);
  return random ? { policy: 'random', seed: Number(random[1]) } : { policy: arm as AuditPolicy };
}

/** The three tightness checks, run on every error: does each of these contexts answer it? */
export interface TightnessChecks {
  /** Restore only the gold that survived. Flipping an irreversible error this way contradicts it. */
  survivingGoldOnly: boolean;
  /** Hand the reader the whole store it can reach. */
  wholeStore: boolean;
  /** Unrelated text of the gold's length in the gold position. It should never flip. */
  placebo: boolean;
}

/** One question under one arm, budget, read setting and condition: the audit's output unit. */
export interface AuditRecord {
  _id: string;
  runId: string;
  questionId: string;
  questionType: string;
  policy: AuditPolicy;
  seed?: number;
  arm: AuditArm;
  /** Token budget of the arm; null for no-eviction. */
  budget: number | null;
  readSetting: ReadSetting;
  condition: ReadCondition;
  /** What filled the read context: the frozen BM25 ranker or the hybrid one (`--ranker`). */
  ranker: 'bm25' | 'hybrid';
  reader: string;
  judge: string;
  importanceScorer?: string;
  store: { units: number; tokens: number; reachableUnits: number; reachableTokens: number };
  /** Gold units, those the read setting cannot reach, and those the arm keeps nowhere (deleted). */
  gold: { units: number; evicted: number; deleted: number };
  contextUnits: number;
  restoredTokens: number;
  verdicts: Classification & {
    cleanGold: boolean;
    policy: boolean;
    restored: boolean;
    checks: TightnessChecks | null;
  };
  answers: { policy: string; restored: string };
  at: number;
}

export interface SummaryRow extends BinCounts {
  arm: string;
  budget: number | null;
  readSetting: ReadSetting;
  condition: ReadCondition;
  reader: string;
  judge: string;
  irreversibleShare: number | null;
  interval: Interval | null;
  /** Irreversible errors per question in the denominator. */
  irreversibleRate: number | null;
  /** Gold units the read setting could not reach, over all gold units. */
  goldEvictedRate: number;
  /** Tightness checks that contradict a bin: irreversible errors fixed without the evicted gold, and placebo flips. */
  violations: {
    survivingGoldFixedIrreversible: number;
    wholeStoreFixedIrreversible: number;
    placeboFlips: number;
  };
  note?: string;
}

/** The arm as a reader of the table names it: memgate once per read setting. */
export function armLabel(r: Pick<AuditRecord, 'arm' | 'readSetting'>): string {
  if (r.arm !== 'memgate') return r.arm;
  return r.readSetting === 'hot' ? 'memgate (hot)' : 'memgate (deep)';
}

/** One row per arm, budget, read setting, condition, reader and judge; ordered for reading. */
export function summariseAudit(records: readonly AuditRecord[]): SummaryRow[] {
  const groups = new Map<string, AuditRecord[]>();
  for (const r of records) {
    const key = [armLabel(r), r.budget ?? 'none', r.readSetting, r.condition, r.reader, r.judge].join('|');
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const rows = [...groups.entries()].map(([key, group]) => {
    const first = group[0]!;
    const items = group.map((r) => r.verdicts);
    const counts = tally(items);
    const goldUnits = group.reduce((s, r) => s + r.gold.units, 0);
    const violations = { survivingGoldFixedIrreversible: 0, wholeStoreFixedIrreversible: 0, placeboFlips: 0 };
    for (const { verdicts: v } of group) {
      if (!v.checks) continue;
      if (v.bin === 'irreversible' && v.checks.survivingGoldOnly) violations.survivingGoldFixedIrreversible++;
      if (v.bin === 'irreversible' && v.checks.wholeStore) violations.wholeStoreFixedIrreversible++;
      if (v.checks.placebo) violations.placeboFlips++;
    }
    const row: SummaryRow = {
      arm: armLabel(first),
      budget: first.budget,
      readSetting: first.readSetting,
      condition: first.condition,
      reader: first.reader,
      judge: first.judge,
      ...counts,
      irreversibleShare: irreversibleShare(counts),
      interval: bootstrapShareInterval(items, { seed: key }),
      irreversibleRate: counts.denominator ? counts.irreversible / counts.denominator : null,
      goldEvictedRate: goldUnits ? group.reduce((s, r) => s + r.gold.evicted, 0) / goldUnits : 0,
      violations,
    };
    if (first.condition === 'forced-gold') {
      row.note =
        first.readSetting === 'hot'
          ? 'recoverable counts gold kept in cold, where a hot-only read does not reach: every gold unit in hot is already in the context'
          : 'recoverable is 0 by construction: every surviving gold unit is already in the context';
    }
    return row;
  });
  const armOrder = (label: string) =>
    AUDIT_ARMS.findIndex((a) => label.startsWith(a)) + (label.endsWith('(deep)') ? 0.5 : 0);
  return rows.sort(
    (a, b) =>
      READ_CONDITIONS.indexOf(a.condition) - READ_CONDITIONS.indexOf(b.condition) ||
      (b.budget ?? Infinity) - (a.budget ?? Infinity) ||
      armOrder(a.arm) - armOrder(b.arm) ||
      a.reader.localeCompare(b.reader) ||
      a.judge.localeCompare(b.judge),
  );
}
