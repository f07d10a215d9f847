import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import {
  continueAsNew,
  executeChild,
  log,
  patched,
  proxyActivities,
  rootCause,
  workflowInfo,
} from '@temporalio/workflow';
import type { NightlyActivities } from '../activities';
import type { ConsolidationReport, PhaseCounts, PhaseDurations } from '../core/messages';
import { consolidateAgentInputSchema, phaseCountsSchema, type ConsolidateAgentInput } from '../core/messages';
import { agentIdSchema, epochMs } from '../core/entry';
import { COUNT_FIELDS, NIGHT_PHASES, type NightPhase, type PhaseOutcome } from '../core/nightly/registry';
import { consolidateAgentWorkflowId, consolidationRunId } from '../core/ids';
import { z } from 'zod';
import { notAhead, RETRY, validated } from './support';

export type { ConsolidateAgentInput };

// Phases page through big stores for as long as they need; each heartbeats while it runs
// (activities/failures.ts `withLiveness`), so a lost worker shows up within the heartbeat
// timeout and the phase, idempotent, is retried on another.
const PHASE_OPTIONS = {
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '20 seconds',
  retry: RETRY,
} as const;
const phases = proxyActivities<NightlyActivities>(PHASE_OPTIONS);

/**
 * One agent's nightly pass, each phase its own activity, in the registry's order
 * (docs/nightly.md, Nightly reflective consolidation); its result is the counts.
 */
export async function consolidateAgent(raw: ConsolidateAgentInput): Promise<ConsolidationReport> {
  const input = validated(consolidateAgentInputSchema, raw, 'consolidation');
  notAhead(input.asOf, 'consolidation');
  // Read once and handed to every phase: whichever worker runs a phase, the run decides by
  // one policy (docs/invariants.md, One policy).
  const policy = await phases.currentPolicy();
  const run = {
    agentId: input.agentId,
    asOf: input.asOf,
    runId: consolidationRunId(input.agentId, input.asOf),
    policy,
  };
  const counts = emptyCounts();
  // Each phase's time, from its scheduling to its result on the workflow's clock (retries
  // included), for the run's record.
  const durations: PhaseDurations = {};
  for (const phase of NIGHT_PHASES) {
    const { external, patch }: NightPhase = phase;
    if (patch !== undefined && !patched(patch)) continue;
    const activity = (
      external
        ? proxyActivities<NightlyActivities>({
            ...PHASE_OPTIONS,
            retry: { ...RETRY, maximumAttempts: external.attempts },
          })
        : phases
    )[`${phase.name}Phase`];
    const started = Date.now();
    try {
      const outcome: PhaseOutcome = await activity(run);
      for (const field of phase.counts) counts[field] = outcome[field] ?? 0;
      durations[phase.name] = Date.now() - started;
    } catch (err) {
      if (!external) throw err;
      // The work stays pending for the next night; the failure is in the run's history.
      log.warn(`the ${phase.name} phase failed; its entries wait for the next night`, {
        agentId: run.agentId,
        error: (err as Error).message,
      });
    }
  }
  return phases.reportPhase(run, counts, durations);
}

/** Every count at 0, in the registry's order. */
function emptyCounts(): PhaseCounts {
  return Object.fromEntries(COUNT_FIELDS.map((field) => [field, 0])) as PhaseCounts;
}

/**
 * Failures a night lists one by one, each message cut to MAX_ERROR_CHARS; past them it counts
 * them only (`failedUnlisted`). Its report travels whole through continue-as-new and is its
 * result, both under Temporal's 2 MB payload limit, however many agents fail.
 */
export const MAX_FAILURES_LISTED = 100;
export const MAX_ERROR_CHARS = 1_000;

const nightlyResultSchema = z.strictObject({
  asOf: epochMs,
  agents: z.number().int().min(0),
  completed: z.number().int().min(0),
  failed: z.array(z.strictObject({ agentId: agentIdSchema, error: z.string() })),
  failedUnlisted: z.number().int().min(0).optional(),
  totals: phaseCountsSchema,
});
export type NightlyResult = z.output<typeof nightlyResultSchema>;

/** One page of the agent listing: a small activity result however many agents there are. */
const AGENTS_PER_PAGE = 1000;

const nightlyInputSchema = z.strictObject({
  /** Defaults to the time the Schedule meant this run for (so a backfill replays that night). */
  asOf: epochMs.optional(),
  /** A continued run picks up after this agent id. */
  after: agentIdSchema.optional(),
  /** Agents listed per activity call; lowered by tests to reach the paging. */
  agentsPerPage: z.number().int().positive().max(AGENTS_PER_PAGE).optional(),
  carried: nightlyResultSchema.optional(),
});
export type NightlyInput = z.input<typeof nightlyInputSchema>;

const scheduledStartTime = defineSearchAttributeKey(
  'TemporalScheduledStartTime',
  SearchAttributeType.DATETIME,
);

/**
 * Started by the Schedule `memgate-nightly`: one `consolidateAgent` child per agent with
 * work, at most `MEMGATE_CONSOLIDATION_CONCURRENCY` at once. An agent whose run fails is
 * reported, not retried here; the others still finish.
 */
export async function nightlyConsolidation(raw: NightlyInput = {}): Promise<NightlyResult> {
  const input = validated(nightlyInputSchema, raw, 'nightly run');
  const asOf =
    input.asOf ?? workflowInfo().typedSearchAttributes.get(scheduledStartTime)?.getTime() ?? Date.now();
  notAhead(asOf, 'nightly run');
  const result: NightlyResult = input.carried ?? {
    asOf,
    agents: 0,
    completed: 0,
    failed: [],
    totals: emptyCounts(),
  };
  const pageSize = input.agentsPerPage ?? AGENTS_PER_PAGE;
  // The last agent whose run started: the next page, or the next run, lists agents after it.
  let after = input.after;
  for (;;) {
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof nightlyConsolidation>({
        ...input,
        asOf,
        ...(after && { after }),
        carried: result,
      });
    }
    const { agentIds, concurrency } = await phases.nightlyAgents({
      ...(after && { after }),
      limit: pageSize,
    });
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < agentIds.length && !workflowInfo().continueAsNewSuggested) {
        const agentId = agentIds[next++]!;
        after = agentId;
        result.agents++;
        try {
          const report = await executeChild(consolidateAgent, {
            workflowId: consolidateAgentWorkflowId(agentId, asOf),
            args: [{ agentId, asOf }],
          });
          result.completed++;
          for (const key of Object.keys(result.totals) as (keyof PhaseCounts)[]) {
            result.totals[key] += report.counts[key];
          }
        } catch (err) {
          // A child's failure says only that the child (or its activity) failed: why is the
          // innermost cause.
          const error = (rootCause(err) ?? (err as Error).message).slice(0, MAX_ERROR_CHARS);
          if (result.failed.length < MAX_FAILURES_LISTED) result.failed.push({ agentId, error });
          else result.failedUnlisted = (result.failedUnlisted ?? 0) + 1;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, agentIds.length) }, lane));
    // A page cut short by a long history goes on in the next run; a short page was the last.
    if (next === agentIds.length && agentIds.length < pageSize) break;
  }
  const policy = await phases.currentPolicy();
  const pruned = await phases.pruneRecords({ asOf, policy });
  await phases.recordNightly({
    runId: `nightly@${new Date(asOf).toISOString()}`,
    asOf,
    counts: {
      agents: result.agents,
      completed: result.completed,
      failed: result.failed.length + (result.failedUnlisted ?? 0),
      ...result.totals,
      ...pruned,
    },
  });
  return result;
}
