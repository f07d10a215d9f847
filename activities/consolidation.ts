import { CancelledFailure, Context } from '@temporalio/activity';
import { assessSummary, buildSummaryEntry } from '../core/clusters';
import type { Config } from '../core/config';
import { memoryPolicy, type Tier } from '../core/entry';
import { NotFoundError } from '../core/errors';
import { refreshPolicy } from '../core/lifecycle';
import {
  consolidatePhase,
  expirePhase,
  reclaimPhase,
  refreshPhase,
  supersedePhase,
  type NightPolicy,
  type NightStore,
} from '../core/nightly';
import { reclaimPolicy } from '../core/reclaim';
import type { Summarizer } from '../llm/summarizer';
import { registeredAgents, tierCounts, tombstoneCount } from '../store/agents';
import type { Store } from '../store/db';
import {
  eraseFromQueryLog,
  removeSummary,
  replaceSummaryContent,
  summariesDerivedFrom,
  tombstoneErasure,
  unlinkSummary,
  unlinkSupersession,
} from '../store/forget';
import {
  deleteEntry,
  recordRun,
  restoreEntry,
  storedEntries,
  type RestoreResult,
  type RunContext,
  type RunRecord,
} from '../store/lifecycle';
import { mongoNight } from '../store/night';
import { pruneRecords } from '../store/retention';
import {
  forgetInputSchema,
  forgetDerivedSchema,
  forgetStepSchema,
  nightlyAgentsInputSchema,
  nightlyRecordSchema,
  pruneInputSchema,
  phaseCountsSchema,
  type PhaseCounts,
  parseInput,
  restoreStepSchema,
  phaseInputSchema,
} from '../core/inputs';
import type { Policy } from '../core/policy';

/**
 * Every phase of one agent's run gets the same input: the run's identity, its clock and the
 * policy the run read when it started (One policy).
 */
export type PhaseInput = RunContext & { policy: Policy };

export type { PhaseCounts };

export interface ConsolidationReport {
  runId: string;
  agentId: string;
  asOf: number;
  counts: PhaseCounts;
  /** Where the agent's memory stands after the run. */
  store: { hot: number; cold: number; tombstones: number };
}

/**
 * Heartbeat, or stop if the run was cancelled: a phase calls this before every store call
 * and for every batch, so a lost worker shows up within the heartbeat timeout and a
 * cancelled run stops at its next step (CancelledFailure) instead of finishing a phase that
 * nobody waits for. Every phase is idempotent, so stopping anywhere is safe.
 */
function heartbeat(detail?: Record<string, number> | string): void {
  const ctx = Context.current();
  if (ctx.cancellationSignal.aborted) throw new CancelledFailure('the run was cancelled');
  ctx.heartbeat(detail);
}

async function* heartbeatEach<T>(batches: AsyncIterable<T>): AsyncGenerator<T> {
  for await (const batch of batches) {
    heartbeat();
    yield batch;
  }
}

/** The night's store with a heartbeat before each call and each batch it yields. */
function heartbeating(night: NightStore): NightStore {
  return new Proxy(night, {
    get(target, key) {
      const member: unknown = Reflect.get(target, key);
      if (typeof member !== 'function') return member;
      return (...args: unknown[]) => {
        heartbeat();
        const out: unknown = member.apply(target, args);
        return out !== null && typeof out === 'object' && Symbol.asyncIterator in out
          ? heartbeatEach(out as AsyncIterable<unknown>)
          : out;
      };
    },
  });
}

/**
 * The nightly pass for one agent, one activity per phase (core/nightly.ts over the MongoDB
 * store): expire → refresh → supersede → consolidate → reclaim → report. Each takes the
 * run's `asOf`, heartbeats its progress and is idempotent; each count it returns is read
 * back from the run's ledger records, so it is exact across retries.
 */
export function createConsolidationActivities(store: Store, config: Config, summarizer: Summarizer) {
  /** The stored policy the workflow read for this run, and this worker's batch size. */
  const nightPolicy = (policy: Policy): NightPolicy => ({
    memory: memoryPolicy(policy),
    refresh: refreshPolicy(policy),
    reclaim: reclaimPolicy(policy),
    cluster: { similarity: policy.clusterSimilarity, neighbours: policy.clusterNeighbours },
    batch: config.lifecycleBatch,
    queryLogRetentionDays: policy.queryLogRetentionDays,
  });
  // Each activity checks its own input: workflows validate theirs, and this is the line the
  // store is behind (a value that reaches a query unchecked could be a query operator).
  const checked = (input: unknown): { run: RunContext; policy: NightPolicy } => {
    const { policy, ...run } = parseInput(phaseInputSchema, input, 'nightly run');
    return { run, policy: nightPolicy(policy) };
  };
  const night = (run: RunContext) => heartbeating(mongoNight(store, run, config.lifecycleBatch));

  return {
    async expirePhase(input: PhaseInput): Promise<{ expired: number }> {
      const { run } = checked(input);
      return expirePhase(night(run), run, heartbeat);
    },

    async refreshPhase(
      input: PhaseInput,
    ): Promise<{ refreshed: number; rehydrated: number; queries: number }> {
      const { run, policy } = checked(input);
      return refreshPhase(night(run), run, policy, heartbeat);
    },

    async consolidatePhase(input: PhaseInput): Promise<{ summarised: number; lossySummaries: number }> {
      const { run, policy } = checked(input);
      return consolidatePhase(night(run), run, policy, (texts) => summarizer.summarize(texts), heartbeat);
    },

    async supersedePhase(input: PhaseInput): Promise<{ superseded: number }> {
      const { run } = checked(input);
      return supersedePhase(night(run), heartbeat);
    },

    async reclaimPhase(input: PhaseInput): Promise<{ spilled: number; evicted: number; hotBefore: number }> {
      const { run, policy } = checked(input);
      return reclaimPhase(night(run), run, policy, heartbeat);
    },

    /** The `runs` document of the run, with its counts and where the store stands. */
    async reportPhase(input: PhaseInput, counts: PhaseCounts): Promise<ConsolidationReport> {
      const { run } = checked(input);
      counts = parseInput(phaseCountsSchema, counts, 'phase counts');
      const [{ hot, cold }, tombstones] = await Promise.all([
        tierCounts(store, run.agentId),
        tombstoneCount(store, run.agentId),
      ]);
      const report: ConsolidationReport = {
        runId: run.runId,
        agentId: run.agentId,
        asOf: run.asOf,
        counts,
        store: { hot: hot ?? 0, cold, tombstones },
      };
      const record: RunRecord = {
        _id: run.runId,
        kind: 'agent',
        agentId: run.agentId,
        asOf: run.asOf,
        status: 'completed',
        finishedAt: Date.now(),
        counts: { ...counts },
        store: report.store,
      };
      await recordRun(store, record);
      return report;
    },

    /** A page of the agents the nightly run fans out to (after `after`), and how many at once. */
    async nightlyAgents(input: {
      after?: string;
      limit: number;
    }): Promise<{ agentIds: string[]; concurrency: number }> {
      input = parseInput(nightlyAgentsInputSchema, input, 'agent listing');
      const agentIds = await registeredAgents(store, input);
      return { agentIds, concurrency: config.consolidationConcurrency };
    },

    /** Ledger, run and audit records past their retention go (the query log goes in refresh). */
    async pruneRecords(input: { asOf: number; policy: Policy }): Promise<Record<string, number>> {
      input = parseInput(pruneInputSchema, input, 'record pruning');
      return pruneRecords(store, input.asOf, input.policy);
    },

    async recordNightly(input: {
      runId: string;
      asOf: number;
      counts: Record<string, number>;
    }): Promise<void> {
      input = parseInput(nightlyRecordSchema, input, 'nightly record');
      await recordRun(store, {
        _id: input.runId,
        kind: 'nightly',
        asOf: input.asOf,
        status: 'completed',
        finishedAt: Date.now(),
        counts: input.counts,
      });
    },

    async restoreEntry(input: {
      agentId: string;
      entryId: string;
      at: number;
      freshUntil?: number;
    }): Promise<RestoreResult> {
      input = parseInput(restoreStepSchema, input, 'restore');
      const result = await restoreEntry(store, input.agentId, input.entryId, input);
      if (!result)
        throw new NotFoundError(`no entry ${input.entryId} for agent ${input.agentId}`, { ...input });
      return result;
    },

    // Erasure (I10), one step per activity; the forget workflow runs them in order.

    async forgetTombstone(input: { agentId: string; entryId: string; at: number }): Promise<void> {
      input = parseInput(forgetStepSchema, input, 'forget');
      if (!(await tombstoneErasure(store, input.agentId, input.entryId, input.at))) {
        throw new NotFoundError(`no entry ${input.entryId} for agent ${input.agentId}`, { ...input });
      }
    },

    /**
     * Every summary built from the entry is rebuilt from its other sources when they are
     * all still stored, or else removed and flagged; links through the entry are undone.
     */
    async forgetDerived(input: {
      agentId: string;
      entryId: string;
      at: number;
      policy: Policy;
    }): Promise<{ resummarised: string[]; removed: string[]; restored: string[] }> {
      input = parseInput(forgetDerivedSchema, input, 'forget');
      const resummarised: string[] = [];
      const removed: string[] = [];
      for (const summary of await summariesDerivedFrom(store, input.agentId, input.entryId)) {
        const remaining = (summary.derivedFrom ?? []).filter((id) => id !== input.entryId);
        const { present, gone } = await storedEntries(store, input.agentId, remaining);
        if (present.length === 0 || gone.length > 0) {
          await removeSummary(store, input.agentId, summary._id, input.entryId, input.at);
          removed.push(summary._id);
          continue;
        }
        const texts = present.map((s) => ({ id: s._id, text: s.text }));
        const text = await summarizer.summarize(texts);
        const assessment = assessSummary(texts, text);
        const rebuilt = buildSummaryEntry(summary._id, present, text, assessment, {
          asOf: input.at,
          runId: summary.source.ref ?? 'forget',
          policy: memoryPolicy(input.policy),
        });
        await replaceSummaryContent(
          store,
          input.agentId,
          rebuilt,
          assessment.lossless,
          input.entryId,
          input.at,
        );
        resummarised.push(summary._id);
        heartbeat(summary._id);
      }
      // The entry may itself be a summary: what leaned on it no longer can.
      await unlinkSummary(store, input.agentId, input.entryId);
      const restored = await unlinkSupersession(store, input.agentId, input.entryId, input.at);
      return { resummarised, removed, restored };
    },

    async forgetEntry(input: {
      agentId: string;
      entryId: string;
    }): Promise<{ tiers: Tier[]; queriesRemoved: number }> {
      input = parseInput(forgetInputSchema, input, 'forget');
      const tiers = await deleteEntry(store, input.agentId, input.entryId);
      const queriesRemoved = await eraseFromQueryLog(store, input.agentId, input.entryId);
      return { tiers, queriesRemoved };
    },
  };
}
