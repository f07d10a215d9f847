/**
 * The nightly phases of one agent's run, each listed once, in the order `consolidateAgent`
 * runs them (docs/nightly.md, The phases). Everything that names the phases reads them here:
 * the workflow (each phase is its activity `<name>Phase`), the run's counts
 * (core/messages.ts) and their metrics, the activities and the simulation (through
 * `NIGHT_PASS`, core/nightly/phases.ts), the benchmark and the stubbed workflow test. A phase is its entry
 * here, its code and its test (CONTRIBUTING.md, Add a nightly phase).
 */
export const NIGHT_PHASES = [
  {
    name: 'expire',
    does: 'volatile facts past their freshness window leave default recall; nothing is deleted',
    counts: ['expired'],
    decisions: ['expire'],
  },
  {
    name: 'refresh',
    does: 'the queries logged since the last night raise the salience of the gated entries they matched, and bring back to hot the cold entries recall used',
    counts: ['refreshed', 'rehydrated'],
    decisions: ['refresh', 'rehydrate'],
  },
  // Before consolidation: a fact superseded tonight is no longer clusterable, so no summary
  // merges it with the fact that supersedes it and keeps the old value in default recall.
  {
    name: 'supersede',
    does: 'a newer fact about the same subject and attribute marks the older one inactive (restorable)',
    counts: ['superseded'],
    decisions: ['supersede'],
  },
  {
    name: 'consolidate',
    does: "near-duplicate entries become summaries, flagged lossy_summary unless they keep every source's facts; sources stay",
    counts: ['summarised', 'lossySummaries'],
    decisions: ['summarise'],
  },
  {
    name: 'reclaim',
    does: 'above the high watermark, entries ranked by a storage signal spill to cold, and only dead ones a summary stands in for are deleted, after their tombstone',
    counts: ['spilled', 'evicted'],
    decisions: ['spill', 'evict'],
  },
  // Last: tonight's summaries are written, and what reclaim deleted needs no vector. Its count
  // is the entries (summaries among them) given their vector by the night.
  {
    name: 'embed',
    does: 'entries the write path left unembedded, and the summaries written tonight, get their vectors',
    counts: ['embedded'],
    decisions: [],
    external: { attempts: 4 },
  },
] as const satisfies readonly NightPhase[];

export interface NightPhase {
  /** Its activity is `<name>Phase`. */
  name: string;
  /**
   * What it does, in one sentence for users: `memgate consolidate --help` lists the phases
   * with it, so a new phase is documented where it is declared (docs/nightly.md goes deeper
   * where a sentence is not enough).
   */
  does: string;
  /** Its fields of the run's counts, each also a metric (`nightlyMetric`). */
  counts: readonly string[];
  /** The ledger events it writes, one per decision: what the simulation compares with the stack. */
  decisions: readonly string[];
  /**
   * A phase that calls another server (embed: the embeddings endpoint) is its own activity,
   * outside the pass over `NightStore` and so outside the simulation. When that server stays
   * down, the night goes on without it after `attempts` tries, visible in the run's history,
   * its work pending for the next night, rather than failing the agent's consolidation.
   */
  external?: { attempts: number };
  /**
   * A phase added after histories without it were recorded: the workflow runs it behind
   * `patched(patch)`, so those histories, and the runs they stand for, still replay
   * (docs/versioning.md).
   */
  patch?: string;
}

type Phase = (typeof NIGHT_PHASES)[number];
export type NightPhaseName = Phase['name'];
/** The phases over `NightStore` (core/nightly/phases.ts), which the simulation runs too. */
export type PassPhaseName = Exclude<Phase, { external: object }>['name'];
export type CountField = Phase['counts'][number];
export type Decision = Phase['decisions'][number];
/** The count fields of one phase. */
export type CountsOf<N extends NightPhaseName> = Extract<Phase, { name: N }>['counts'][number];

/** A phase's activity result: its counts (an unavailable external phase has none), and what else it reports. */
export type PhaseOutcome = Partial<Record<CountField, number>> & Record<string, unknown>;

/** Every field of the run's counts, phase by phase. */
export const COUNT_FIELDS: readonly CountField[] = NIGHT_PHASES.flatMap((p) => p.counts);

/** Every kind of decision the pass records, phase by phase. */
export const DECISIONS: readonly Decision[] = NIGHT_PHASES.flatMap((p) => p.decisions);

/** The phases over `NightStore`, in the order they run. */
export const PASS_PHASES: readonly PassPhaseName[] = NIGHT_PHASES.flatMap((p) =>
  'external' in p ? [] : [p.name],
);

/** The Prometheus counter of a count: `lossySummaries` → `memgate_nightly_lossy_summaries`. */
export function nightlyMetric(field: CountField): string {
  return `memgate_nightly_${field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
}
