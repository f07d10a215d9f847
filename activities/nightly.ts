import { Context } from '@temporalio/activity';
import type { ConsolidationReport } from '../core/messages';
import type { Config } from '../core/config';
import { memoryPolicy } from '../core/entry';
import { refreshPolicy } from '../core/nightly/plans';
import { NIGHT_PASS, type NightPolicy } from '../core/nightly/phases';
import { COUNT_FIELDS, nightlyMetric, PASS_PHASES, type PassPhaseName } from '../core/nightly/registry';
import { reclaimPolicy } from '../core/nightly/reclaim';
import type { Summariser } from '../llm/summariser';
import { censusAsOf } from '../core/census';
import { agentCensus, registeredAgents, tierCounts, tombstoneCount } from '../store/agents';
import type { Store } from '../store/db';
import { recordAgentRun, recordRun, type RunRecord } from '../store/runs';
import type { RunContext } from '../store/ledger';
import { mongoNight } from '../store/nightStore';
import { heartbeat, heartbeating } from './liveness';
import { doubtHotCountIfRetried, withdrawErasedCopiesIfRetried } from './retries';
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
  phaseDurationsSchema,
  type PhaseCounts,
  type PhaseDurations,
  parseInput,
  phaseInputSchema,
} from '../core/messages';
import type { Policy } from '../core/policy';

/**
 * Every phase of one agent's run gets the same input: the run's identity, its clock and the
 * policy the run read when it started (docs/invariants.md, One policy).
 */
export type PhaseInput = RunContext & { policy: Policy };

export type { PhaseCounts };

/** The activity `<name>Phase` of each phase of the pass. */
type PassActivities = {
  [N in PassPhaseName as `${N}Phase`]: (input: PhaseInput) => ReturnType<(typeof NIGHT_PASS)[N]>;
};

/**
 * The nightly pass for one agent, one activity per phase (core/nightly/phases.ts over the MongoDB
 * store), in the registry's order (core/nightly/registry.ts), then the report. Each takes the
 * run's `asOf`, heartbeats its progress and is idempotent; each count it returns is read
 * back from the run's ledger records, so it is exact across retries.
 */
export function createNightlyActivities(
  store: Store,
  config: Config,
  summariser: Summariser,
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

  const pass = Object.fromEntries(
    PASS_PHASES.map((name) => [
      `${name}Phase`,
      async (input: PhaseInput) => {
        const { run, policy } = checked(input);
        await doubtHotCountIfRetried(store, run.agentId);
        await withdrawErasedCopiesIfRetried(store, run);
        return NIGHT_PASS[name]({
          night: night(run),
          run,
          policy,
          models: {
            summarise: (texts) => summariser.summarise(texts),
            ...(byMeaning && { neighboursByMeaning: byMeaning(run.agentId) }),
          },
          progress: heartbeat,
        });
      },
    ]),
  ) as PassActivities;

  return {
    ...pass,

    /**
     * The `runs` document of the run: its counts, each phase's time (absent from runs begun
     * before they were kept), where the store stands, and its census as of the run.
     */
    async reportPhase(
      input: PhaseInput,
      counts: PhaseCounts,
      durations?: PhaseDurations,
    ): Promise<ConsolidationReport> {
      const { run } = checked(input);
      counts = parseInput(phaseCountsSchema, counts, 'phase counts');
      durations = parseInput(phaseDurationsSchema, durations ?? {}, 'phase durations');
      const [{ hot, cold }, tombstones, census] = await Promise.all([
        tierCounts(store, run.agentId),
        tombstoneCount(store, run.agentId),
        agentCensus(store, run.agentId),
      ]);
      const report: ConsolidationReport = {
        runId: run.runId,
        agentId: run.agentId,
        asOf: run.asOf,
        counts,
        store: { hot: hot ?? 0, cold, tombstones },
      };
      const record: RunRecord & { agentId: string } = {
        _id: run.runId,
        kind: 'agent',
        agentId: run.agentId,
        asOf: run.asOf,
        status: 'completed',
        finishedAt: Date.now(),
        counts: { ...counts },
        durations,
        store: report.store,
        census: censusAsOf(census, run.asOf),
      };
      await recordAgentRun(store, record);
      // Per run, not per agent: agent ids never become labels (docs/operations.md, Metrics).
      const meter = Context.current().metricMeter;
      for (const field of COUNT_FIELDS) {
        meter
          .createCounter(nightlyMetric(field), 'entries', `entries ${field} by nightly runs`)
          .add(counts[field]);
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
