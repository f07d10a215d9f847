import { Context } from '@temporalio/activity';
import type { ConsolidationReport } from '../core/messages';
import type { Config } from '../core/config';
import { memoryPolicy } from '../core/entry';
import { refreshPolicy } from '../core/nightly/plans';
import {
  consolidatePhase,
  expirePhase,
  reclaimPhase,
  refreshPhase,
  supersedePhase,
  type NightPolicy,
} from '../core/nightly/phases';
import { reclaimPolicy } from '../core/nightly/reclaim';
import type { Summarizer } from '../llm/summarizer';
import { registeredAgents, tierCounts, tombstoneCount } from '../store/agents';
import type { Store } from '../store/db';
import { recordRun, type RunRecord } from '../store/runs';
import type { RunContext } from '../store/ledger';
import { mongoNight } from '../store/nightStore';
import { heartbeat, heartbeating } from './liveness';
import type { MeaningNeighbours } from '../core/nightly/clusters';
import type { Neighbour } from '../vectorEngine/protocol';
import { vectorIndexLimitsOf, type VectorIndexes } from '../store/vectorIndexes';
import { vectorsOf } from '../store/vectors';

import { pruneRecords, trimVectorFeeds } from '../store/retention';
import {
  nightlyAgentsInputSchema,
  nightlyRecordSchema,
  pruneInputSchema,
  phaseCountsSchema,
  type PhaseCounts,
  parseInput,
  phaseInputSchema,
} from '../core/messages';
import type { Policy } from '../core/policy';

/** `lossySummaries` → `lossy_summaries`, as Prometheus names go. */
function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/**
 * Every phase of one agent's run gets the same input: the run's identity, its clock and the
 * policy the run read when it started (docs/invariants.md, One policy).
 */
export type PhaseInput = RunContext & { policy: Policy };

export type { PhaseCounts };

/**
 * The nightly pass for one agent, one activity per phase (core/nightly/phases.ts over the MongoDB
 * store): expire → refresh → supersede → consolidate → reclaim → report. Each takes the
 * run's `asOf`, heartbeats its progress and is idempotent; each count it returns is read
 * back from the run's ledger records, so it is exact across retries.
 */
export function createNightlyActivities(
  store: Store,
  config: Config,
  summarizer: Summarizer,
  indexes: VectorIndexes | undefined,
) {
  /** The stored policy the workflow read for this run, and this worker's batch size. */
  const nightPolicy = (policy: Policy): NightPolicy => ({
    memory: memoryPolicy(policy),
    refresh: refreshPolicy(policy),
    reclaim: reclaimPolicy(policy),
    cluster: {
      similarity: policy.clusterSimilarity,
      neighbours: policy.clusterNeighbours,
      ...(policy.clusterByMeaning && { meaningSimilarity: policy.clusterMeaningSimilarity }),
    },
    batch: config.nightlyBatch,
    queryLogRetentionDays: policy.queryLogRetentionDays,
  });
  // Each activity checks its own input: workflows validate theirs, and this is the line the
  // store is behind (a value that reaches a query unchecked could be a query operator).
  const checked = (input: unknown): { run: RunContext; policy: NightPolicy } => {
    const { policy, ...run } = parseInput(phaseInputSchema, input, 'nightly run');
    return { run, policy: nightPolicy(policy) };
  };
  const night = (run: RunContext) => heartbeating(mongoNight(store, run, config.nightlyBatch));
  // With embeddings, the agent's vectors of this worker's model, searched through the
  // process's bounded in-memory indexes, which recall uses too (store/vectorIndexes.ts); the
  // night has no caller waiting, so it waits for a load.
  const byMeaning =
    indexes &&
    ((agentId: string) =>
      async (ids: readonly string[], k: number, minSimilarity: number): Promise<MeaningNeighbours> => {
        const space = { model: config.embeddingsModel, dimensions: config.embeddingsDimensions };
        const out = new Map<string, Neighbour[]>();
        for (const [id, vector] of await vectorsOf(store, agentId, ids, space)) {
          const found = await indexes.nearest(agentId, space.model, vector, k + 1, { untilLoaded: true });
          // An agent larger than the bound is clustered by its terms alone.
          if (!found.available) break;
          out.set(
            id,
            found.neighbours.filter((n) => n.id !== id && n.similarity >= minSimilarity).slice(0, k),
          );
          heartbeat({ searched: out.size });
        }
        return out;
      });

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
      return consolidatePhase(
        night(run),
        run,
        policy,
        {
          summarize: (texts) => summarizer.summarize(texts),
          ...(byMeaning && { neighboursByMeaning: byMeaning(run.agentId) }),
        },
        heartbeat,
      );
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
      // Per run, not per agent: agent ids never become labels (docs/operations.md, Metrics).
      const meter = Context.current().metricMeter;
      for (const [phase, n] of Object.entries(counts)) {
        meter
          .createCounter(`memgate_nightly_${snakeCase(phase)}`, 'entries', `entries ${phase} by nightly runs`)
          .add(n);
      }
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

    /**
     * Ledger, run and audit records past their retention go (the query log goes in refresh),
     * and the vector feeds' changes every reader has resolved.
     */
    async pruneRecords(input: { asOf: number; policy: Policy }): Promise<Record<string, number>> {
      input = parseInput(pruneInputSchema, input, 'record pruning');
      const pruned = await pruneRecords(store, input.asOf, input.policy);
      const feedChangesPruned = await trimVectorFeeds(store, {
        fenceDelayMs: vectorIndexLimitsOf(config).fenceDelayMs,
      });
      return { ...pruned, feedChangesPruned };
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
  };
}
