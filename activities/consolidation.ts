import { activityInfo, heartbeat } from '@temporalio/activity';
import { assessSummary, buildSummaryEntry, clusterable, nearDuplicateClusters } from '../core/clusters';
import type { Config } from '../core/config';
import { memoryPolicy, type Entry, type Tier } from '../core/entry';
import { NotFoundError } from '../core/errors';
import { withTypedFailures } from './failures';
import { dueForExpiry, planRefresh, planSupersession, QueryIndex, refreshPolicy } from '../core/lifecycle';
import { planReclaim, reclaimPolicy, type ReclaimEntry, type ReclaimStep } from '../core/reclaim';
import type { Summarizer } from '../llm/summarizer';
import type { Store } from '../store/db';
import {
  eraseFromQueryLog,
  removeEntry,
  removeSummary,
  replaceSummaryContent,
  summariesDerivedFrom,
  tombstoneErasure,
  unlinkSummary,
  unlinkSupersession,
} from '../store/forget';
import {
  agentsWithWork,
  batchesAfter,
  countEvents,
  evictEntry,
  expireEntry,
  previousRunAsOf,
  recordRun,
  refreshHotEntry,
  rehydrateEntry,
  restoreEntry,
  spillEntries,
  storedEntries,
  summaryId,
  supersedeEntry,
  tierCollection,
  TIERS,
  writeSummary,
  type RestoreResult,
  type RunContext,
  type RunRecord,
  unsubsumed,
} from '../store/lifecycle';

/** Every phase of one agent's run gets the same input: the run's identity and its clock. */
export type PhaseInput = RunContext;

export interface PhaseCounts {
  expired: number;
  refreshed: number;
  rehydrated: number;
  summarised: number;
  lossySummaries: number;
  superseded: number;
  spilled: number;
  evicted: number;
}

export interface ConsolidationReport {
  runId: string;
  agentId: string;
  asOf: number;
  counts: PhaseCounts;
  /** Where the agent's memory stands after the run. */
  store: { hot: number; cold: number; tombstones: number };
}

/** Where a paging phase got to; a retried attempt resumes after it. */
interface TierCursor {
  tier: Tier;
  after?: string;
}

function resumeFrom<T>(): T | undefined {
  return activityInfo().heartbeatDetails as T | undefined;
}

/** Tiers from the cursor's on, each with the id to resume after. */
function tiersFrom(cursor: TierCursor | undefined): { tier: Tier; after?: string }[] {
  const start = cursor ? TIERS.indexOf(cursor.tier) : 0;
  return TIERS.slice(start).map((tier, i) =>
    i === 0 && cursor?.after ? { tier, after: cursor.after } : { tier },
  );
}

const RECLAIM_FIELDS = {
  _id: 1,
  kind: 1,
  tokens: 1,
  writtenAt: 1,
  refreshedAt: 1,
  validity: 1,
  expiredAt: 1,
  isActive: 1,
  dormantAt: 1,
  subsumedBy: 1,
};

/**
 * The nightly pass for one agent, one activity per phase (design 5): expire → refresh →
 * consolidate → supersede → reclaim → report. Each takes the run's `asOf`, pages through
 * its work in batches, heartbeats a cursor it resumes from, and is idempotent; each count
 * it returns is read back from the run's ledger records, so it is exact across retries.
 */
export function createConsolidationActivities(store: Store, config: Config, summarizer: Summarizer) {
  const policy = memoryPolicy(config);
  const reclaim = reclaimPolicy(config);
  const refresh = refreshPolicy(config);
  const batch = config.lifecycleBatch;

  return {
    /** Volatile facts past `freshUntil` leave default recall: annotated, never deleted. */
    async expirePhase(run: PhaseInput): Promise<{ expired: number }> {
      for (const { tier, after } of tiersFrom(resumeFrom<TierCursor>())) {
        const due = {
          agentId: run.agentId,
          'validity.volatile': true,
          'validity.freshUntil': { $lt: run.asOf },
          expiredAt: { $exists: false },
        };
        for await (const page of batchesAfter(tierCollection(store, tier), due, after, batch)) {
          for (const e of page) {
            if (dueForExpiry(e, run.asOf)) await expireEntry(store, run, e);
            heartbeat({ tier, after: e._id } satisfies TierCursor);
          }
        }
      }
      return { expired: await countEvents(store, run, 'expire') };
    },

    /**
     * Queries logged since the agent's previous run raise the salience of the gated hot
     * entries they match inside their refresh window, and rehydrate the cold ones they match.
     */
    async refreshPhase(run: PhaseInput): Promise<{ refreshed: number; rehydrated: number; queries: number }> {
      const since = await previousRunAsOf(store, run.asOf, { kind: 'agent', agentId: run.agentId });
      const logged = await store.queries
        .find(
          {
            agentId: run.agentId,
            at: since === undefined ? { $lte: run.asOf } : { $gt: since, $lte: run.asOf },
          },
          { projection: { terms: 1 } },
        )
        .toArray();
      const queries = new QueryIndex(logged.map((q) => q.terms));
      if (queries.size > 0) {
        const fields = {
          _id: 1,
          terms: 1,
          salience: 1,
          dormantAt: 1,
          isActive: 1,
          validity: 1,
          expiredAt: 1,
        };
        for (const { tier, after } of tiersFrom(resumeFrom<TierCursor>())) {
          const candidates =
            tier === 'hot'
              ? {
                  agentId: run.agentId,
                  isActive: true,
                  dormantAt: { $lte: run.asOf, $gte: run.asOf - refresh.refreshWindowMs },
                }
              : { agentId: run.agentId, isActive: true };
          for await (const page of batchesAfter(
            tierCollection(store, tier),
            candidates,
            after,
            batch,
            fields,
          )) {
            const steps = planRefresh(
              page.map((entry) => ({ entry, tier })),
              queries,
              run.asOf,
              refresh,
            );
            for (const step of steps) {
              if (step.tier === 'hot') await refreshHotEntry(store, run, step);
              else await rehydrateEntry(store, run, step);
              heartbeat({ tier, after: step.id } satisfies TierCursor);
            }
            heartbeat({ tier, after: page[page.length - 1]!._id } satisfies TierCursor);
          }
        }
      }
      return {
        refreshed: await countEvents(store, run, 'refresh'),
        rehydrated: await countEvents(store, run, 'rehydrate'),
        queries: queries.size,
      };
    },

    /**
     * Near-duplicate clusters of hot entries become summaries; the sources stay, each
     * marked `subsumedBy` with whether the summary kept all of its facts. A retry first
     * completes the summaries this run already wrote, then clusters what is still free.
     */
    async consolidatePhase(run: PhaseInput): Promise<{ summarised: number; lossySummaries: number }> {
      const ours = await store.hot
        .find({ agentId: run.agentId, kind: 'summary', 'source.ref': run.runId })
        .toArray();
      for (const summary of ours) {
        const { present } = await storedEntries(store, run.agentId, summary.derivedFrom ?? []);
        const assessment = assessSummary(
          present.map((s) => ({ id: s._id, text: s.text })),
          summary.text,
        );
        await writeSummary(store, run, summary, assessment.lossless);
      }

      const fields = { _id: 1, writtenAt: 1, terms: 1, kind: 1, isActive: 1, validity: 1, expiredAt: 1 };
      const items: { id: string; writtenAt: number; terms: string[] }[] = [];
      let loaded = 0;
      for await (const page of batchesAfter(store.hot, unsubsumed(run.agentId), undefined, batch, fields)) {
        for (const e of page)
          if (clusterable(e, run.asOf)) items.push({ id: e._id, writtenAt: e.writtenAt, terms: e.terms });
        heartbeat({ loaded: (loaded += page.length) });
      }
      const clusters = nearDuplicateClusters(items, {
        similarity: config.clusterSimilarity,
        neighbours: config.clusterNeighbours,
      });
      let done = 0;
      for (const ids of clusters) {
        const { present: sources } = await storedEntries(store, run.agentId, ids);
        if (sources.length < 2) continue;
        const texts = sources.map((s) => ({ id: s._id, text: s.text }));
        const text = await summarizer.summarize(texts);
        const assessment = assessSummary(texts, text);
        const summary = buildSummaryEntry(
          summaryId(
            run.agentId,
            sources.map((s) => s._id),
          ),
          sources,
          text,
          assessment,
          { asOf: run.asOf, runId: run.runId, policy },
        );
        await writeSummary(store, run, summary, assessment.lossless);
        heartbeat({ loaded, clusters: clusters.length, done: ++done });
      }
      return {
        summarised: await countEvents(store, run, 'summarise'),
        lossySummaries: await store.hot.countDocuments({
          agentId: run.agentId,
          kind: 'summary',
          'source.ref': run.runId,
          lossy_summary: true,
        }),
      };
    },

    /** A newer dated fact about the same subject and attribute supersedes the older one. */
    async supersedePhase(run: PhaseInput): Promise<{ superseded: number }> {
      const fields = {
        _id: 1,
        subject: 1,
        attribute: 1,
        writtenAt: 1,
        isActive: 1,
        supersededBy: 1,
        restoredAt: 1,
      };
      const facts = new Map<string, Entry>();
      for (const tier of TIERS) {
        for await (const page of batchesAfter(
          tierCollection(store, tier),
          { agentId: run.agentId, subject: { $exists: true } },
          undefined,
          batch,
          fields,
        )) {
          for (const e of page) if (!facts.has(e._id)) facts.set(e._id, e);
        }
      }
      const after = resumeFrom<{ after: string }>()?.after;
      const steps = planSupersession([...facts.values()]).filter(
        (s) => after === undefined || s.olderId > after,
      );
      for (const step of steps) {
        await supersedeEntry(store, run, step.olderId, step.newerId);
        heartbeat({ after: step.olderId });
      }
      return { superseded: await countEvents(store, run, 'supersede') };
    },

    /**
     * Above the high watermark, rank hot entries by storage signals alone and spill or evict
     * them down to the low watermark (design 4.1). The plan is recomputed from the store on
     * every attempt — hot's own contents are the cursor — so a retry after a crash between
     * a cold copy and its hot delete finishes that move and carries on.
     */
    async reclaimPhase(run: PhaseInput): Promise<{ spilled: number; evicted: number; hotBefore: number }> {
      const hot: ReclaimEntry[] = [];
      for await (const page of batchesAfter(
        store.hot,
        { agentId: run.agentId },
        undefined,
        batch,
        RECLAIM_FIELDS,
      )) {
        hot.push(...page);
        heartbeat({ loaded: hot.length });
      }
      const plan = new Map(planReclaim(hot, run.asOf, reclaim).map((step) => [step.id, step]));
      let done = 0;
      let spills: { step: ReclaimStep; entry: Entry }[] = [];
      const spillPending = async () => {
        await spillEntries(store, run, spills);
        done += spills.length;
        spills = [];
        heartbeat({ loaded: hot.length, planned: plan.size, done });
      };
      // A second pass reads the planned entries whole, in `_id` order, a batch at a time.
      if (plan.size > 0) {
        for await (const page of batchesAfter(store.hot, { agentId: run.agentId }, undefined, batch)) {
          for (const entry of page) {
            const step = plan.get(entry._id);
            if (!step) continue;
            if (step.action === 'evict') {
              await evictEntry(store, run, entry, step);
              heartbeat({ loaded: hot.length, planned: plan.size, done: ++done });
            } else {
              spills.push({ step, entry });
              if (spills.length >= batch) await spillPending();
            }
          }
        }
        await spillPending();
      }
      return {
        spilled: await countEvents(store, run, 'spill'),
        evicted: await countEvents(store, run, 'evict'),
        hotBefore: hot.length,
      };
    },

    /** The `runs` document of the run, with its counts and where the store stands. */
    async reportPhase(run: PhaseInput, counts: PhaseCounts): Promise<ConsolidationReport> {
      const [hot, cold, tombstones] = await Promise.all([
        store.hot.countDocuments({ agentId: run.agentId }),
        store.cold.countDocuments({ agentId: run.agentId }),
        store.tombstones.countDocuments({ agentId: run.agentId }),
      ]);
      const report: ConsolidationReport = {
        runId: run.runId,
        agentId: run.agentId,
        asOf: run.asOf,
        counts,
        store: { hot, cold, tombstones },
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

    /** The agents the nightly run fans out to (after `after`, for a continued run), and how many at once. */
    async nightlyAgents(input: {
      asOf: number;
      after?: string;
    }): Promise<{ agentIds: string[]; concurrency: number }> {
      const since = (await previousRunAsOf(store, input.asOf, { kind: 'nightly' })) ?? 0;
      const agentIds = (await agentsWithWork(store, since, input.asOf)).filter(
        (a) => input.after === undefined || a > input.after,
      );
      return { agentIds, concurrency: config.consolidationConcurrency };
    },

    async recordNightly(input: {
      runId: string;
      asOf: number;
      counts: Record<string, number>;
    }): Promise<void> {
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
      return withTypedFailures(async () => {
        const result = await restoreEntry(store, input.agentId, input.entryId, input);
        if (!result)
          throw new NotFoundError(`no entry ${input.entryId} for agent ${input.agentId}`, { ...input });
        return result;
      });
    },

    // Erasure (I10), one step per activity; the forget workflow runs them in order.

    async forgetTombstone(input: { agentId: string; entryId: string; at: number }): Promise<void> {
      return withTypedFailures(async () => {
        if (!(await tombstoneErasure(store, input.agentId, input.entryId, input.at))) {
          throw new NotFoundError(`no entry ${input.entryId} for agent ${input.agentId}`, { ...input });
        }
      });
    },

    /**
     * Every summary built from the entry is rebuilt from its other sources when they are
     * all still stored, or else removed and flagged; links through the entry are undone.
     */
    async forgetDerived(input: {
      agentId: string;
      entryId: string;
      at: number;
    }): Promise<{ resummarised: string[]; removed: string[]; restored: string[] }> {
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
          policy,
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
      const tiers = await removeEntry(store, input.agentId, input.entryId);
      const queriesRemoved = await eraseFromQueryLog(store, input.agentId, input.entryId);
      return { tiers, queriesRemoved };
    },
  };
}
