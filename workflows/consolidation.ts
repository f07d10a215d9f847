import { defineSearchAttributeKey, SearchAttributeType, type RetryPolicy } from '@temporalio/common';
import {
  ApplicationFailure,
  continueAsNew,
  executeChild,
  proxyActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ConsolidationReport, PhaseCounts } from '../activities/consolidation';
import { agentIdSchema } from '../core/entry';

export interface ConsolidateAgentInput {
  agentId: string;
  /** The run's clock (epoch ms): every phase decides as of this instant. */
  asOf: number;
}

/** The same agent and instant always make the same run, whose ledger records it rewrites. */
export function consolidationRunId(agentId: string, asOf: number): string {
  return `${agentId}@${new Date(asOf).toISOString()}`;
}

export function consolidateAgentWorkflowId(agentId: string, asOf: number): string {
  return `memgate-consolidate-${consolidationRunId(agentId, asOf)}`;
}

const RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 10,
  nonRetryableErrorTypes: ['InvalidInput', 'InvalidConfig', 'EvictionBoundaryError'],
};

// Phases page through big stores: a lost worker shows up as a missed heartbeat, and the
// retry resumes from the last cursor it heartbeated.
const phases = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '2 minutes',
  retry: RETRY,
});

function invalidInput(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'InvalidInput', message, nonRetryable: true });
}

function assertRunInput(input: ConsolidateAgentInput): void {
  if (!agentIdSchema.safeParse(input.agentId).success) throw invalidInput(`invalid agentId ${input.agentId}`);
  if (!Number.isSafeInteger(input.asOf) || input.asOf < 0)
    throw invalidInput('asOf must be epoch milliseconds');
}

/** One agent's nightly pass, each phase its own activity (design 5); its result is the counts. */
export async function consolidateAgent(input: ConsolidateAgentInput): Promise<ConsolidationReport> {
  assertRunInput(input);
  const run = {
    agentId: input.agentId,
    asOf: input.asOf,
    runId: consolidationRunId(input.agentId, input.asOf),
  };
  const { expired } = await phases.expirePhase(run);
  const { refreshed, rehydrated } = await phases.refreshPhase(run);
  const { summarised, lossySummaries } = await phases.consolidatePhase(run);
  const { superseded } = await phases.supersedePhase(run);
  const { spilled, evicted } = await phases.reclaimPhase(run);
  const counts: PhaseCounts = {
    expired,
    refreshed,
    rehydrated,
    summarised,
    lossySummaries,
    superseded,
    spilled,
    evicted,
  };
  return phases.reportPhase(run, counts);
}

export interface NightlyInput {
  /** Defaults to the time the Schedule meant this run for (so a backfill replays that night). */
  asOf?: number;
  /** A continued run picks up after this agent id. */
  after?: string;
  carried?: NightlyResult;
}

export interface NightlyResult {
  asOf: number;
  agents: number;
  completed: number;
  failed: { agentId: string; error: string }[];
  totals: PhaseCounts;
}

const scheduledStartTime = defineSearchAttributeKey(
  'TemporalScheduledStartTime',
  SearchAttributeType.DATETIME,
);

const EMPTY_COUNTS: PhaseCounts = {
  expired: 0,
  refreshed: 0,
  rehydrated: 0,
  summarised: 0,
  lossySummaries: 0,
  superseded: 0,
  spilled: 0,
  evicted: 0,
};

/**
 * Started by the Schedule `memgate-nightly`: one `consolidateAgent` child per agent with
 * work, at most `MEMGATE_CONSOLIDATION_CONCURRENCY` at once. An agent whose run fails is
 * reported, not retried here; the others still finish.
 */
export async function nightlyConsolidation(input: NightlyInput = {}): Promise<NightlyResult> {
  const asOf =
    input.asOf ?? workflowInfo().typedSearchAttributes.get(scheduledStartTime)?.getTime() ?? Date.now();
  const { agentIds, concurrency } = await phases.nightlyAgents({
    ...(input.after && { after: input.after }),
  });
  const result: NightlyResult = input.carried ?? {
    asOf,
    agents: 0,
    completed: 0,
    failed: [],
    totals: { ...EMPTY_COUNTS },
  };
  result.agents += agentIds.length;
  let next = 0;
  let started = 0;

  const lane = async (): Promise<void> => {
    while (next < agentIds.length && !workflowInfo().continueAsNewSuggested) {
      const agentId = agentIds[next++]!;
      started = next;
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
        result.failed.push({ agentId, error: (err as Error).message });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, agentIds.length) }, lane));

  if (started < agentIds.length) {
    // History is long: hand the rest to a fresh run, which lists agents after the last started.
    result.agents -= agentIds.length - started;
    await continueAsNew<typeof nightlyConsolidation>({
      asOf,
      after: agentIds[started - 1]!,
      carried: result,
    });
  }
  await phases.recordNightly({
    runId: `nightly@${new Date(asOf).toISOString()}`,
    asOf,
    counts: {
      agents: result.agents,
      completed: result.completed,
      failed: result.failed.length,
      ...result.totals,
    },
  });
  return result;
}

export interface RestoreInput {
  agentId: string;
  entryId: string;
  /** Renew an expired volatile fact until this instant (epoch ms). */
  freshUntil?: number;
}

const oneShot = proxyActivities<Activities>({ startToCloseTimeout: '1 minute', retry: RETRY });

export function restoreWorkflowId(agentId: string, entryId: string): string {
  return `memgate-restore-${agentId}-${entryId}`;
}

/** `memgate restore`: reverse a supersession (or renew an expired fact), with a ledger record. */
export async function restore(input: RestoreInput) {
  if (!agentIdSchema.safeParse(input.agentId).success) throw invalidInput(`invalid agentId ${input.agentId}`);
  return oneShot.restoreEntry({ ...input, at: Date.now() });
}

export interface ForgetInput {
  agentId: string;
  entryId: string;
}

export function forgetWorkflowId(agentId: string, entryId: string): string {
  return `memgate-forget-${agentId}-${entryId}`;
}

/**
 * Erasure (I10): a content-free tombstone first, then every summary derived from the entry
 * is rebuilt without it or removed and flagged, then the entry leaves both tiers and the
 * query log. Each step is idempotent, so the workflow can be rerun at any point.
 */
export async function forget(input: ForgetInput) {
  if (!agentIdSchema.safeParse(input.agentId).success) throw invalidInput(`invalid agentId ${input.agentId}`);
  const step = { ...input, at: Date.now() };
  await oneShot.forgetTombstone(step);
  const derived = await phases.forgetDerived(step);
  const removed = await oneShot.forgetEntry(input);
  return { entryId: input.entryId, ...derived, ...removed };
}
