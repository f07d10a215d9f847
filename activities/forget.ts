import { memoryPolicy, type Entry, type Tier } from '../core/entry';
import { NotFoundError } from '../core/errors';
import { forgetDerivedSchema, forgetStepSchema, parseInput } from '../core/messages';
import { assessSummary, buildSummaryEntry } from '../core/nightly/clusters';
import type { Policy } from '../core/policy';
import { extractiveSummary, type Summariser } from '../llm/summariser';
import type { Store } from '../store/db';
import { beginErasure, deleteEntry, endErasure, erasedAmong } from '../store/erasure';
import {
  eraseFromQueryLog,
  removeSummary,
  replaceSummaryContent,
  summariesDerivedFrom,
  tombstoneErasure,
  unlinkSummary,
  unlinkSupersession,
} from '../store/forget';
import { storedEntries } from '../store/tiers';
import { heartbeat } from './liveness';
import { doubtHotCountIfRetried } from './retries';

interface ForgetStep {
  agentId: string;
  entryId: string;
  at: number;
  policy: Policy;
}

/**
 * Erasure (docs/invariants.md, Erasure wins), one step per activity; the forget workflow runs
 * them in order. No step before the content is gone calls a model, so a failing summariser
 * never leaves the erased entry readable: only the summaries' final wording waits for it.
 */
export function createForgetActivities(store: Store, summariser: Summariser) {
  /**
   * The other sources of a summary built from the erased entry, oldest first, when the summary
   * can be rebuilt from them: all still stored, and none erased. A source another erasure
   * claimed stays stored until that erasure deletes it; its tombstone, written first, says it
   * is going, so of two erasures racing over one summary the later to look removes it.
   */
  /**
   * Each summary still built from the erased entry: rebuilt by `rebuild` from its other
   * sources when they all still stand, else removed. Returns the ids of those removed and how
   * many logged recalls left the log with them.
   */
  async function eachDerivedSummary(
    input: ForgetStep,
    rebuild: (summary: Entry, sources: Entry[]) => Promise<void>,
  ): Promise<{ removed: string[]; queriesRemoved: number }> {
    const removed: string[] = [];
    let queriesRemoved = 0;
    for (const summary of await summariesDerivedFrom(store, input.agentId, input.entryId)) {
      const sources = await rebuildableFrom(input, summary);
      if (sources) {
        await rebuild(summary, sources);
      } else {
        queriesRemoved += await removeSummary(store, input.agentId, summary._id, input.entryId, input.at);
        removed.push(summary._id);
      }
    }
    return { removed, queriesRemoved };
  }

  async function rebuildableFrom(input: ForgetStep, summary: Entry): Promise<Entry[] | undefined> {
    const remaining = (summary.derivedFrom ?? []).filter((id) => id !== input.entryId);
    const { present, gone } = await storedEntries(store, input.agentId, remaining);
    if (present.length === 0 || gone.length > 0) return undefined;
    const erased = await erasedAmong(
      store,
      input.agentId,
      present.map((s) => s._id),
    );
    return erased.size > 0 ? undefined : present;
  }

  async function rewrite(
    input: ForgetStep,
    summary: Entry,
    sources: Entry[],
    text: string,
    final: boolean,
  ): Promise<void> {
    const texts = sources.map((s) => ({ id: s._id, text: s.text }));
    const assessment = assessSummary(texts, text);
    const rebuilt = buildSummaryEntry(summary._id, sources, text, assessment, {
      asOf: input.at,
      runId: summary.source.ref ?? 'forget',
      policy: memoryPolicy(input.policy),
    });
    await replaceSummaryContent(store, input.agentId, rebuilt, assessment.lossless, input.entryId, input.at, {
      final,
    });
  }

  return {
    async forgetTombstone(input: { agentId: string; entryId: string; at: number }): Promise<void> {
      input = parseInput(forgetStepSchema, input, 'forget');
      // Under way before anything is written: a recall meanwhile looks at its hits' tombstones.
      await beginErasure(store, input.agentId, input.entryId);
      if (!(await tombstoneErasure(store, input.agentId, input.entryId, input.at))) {
        await endErasure(store, input.agentId, input.entryId);
        throw new NotFoundError(`no entry ${input.entryId} for agent ${input.agentId}`, { ...input });
      }
    },

    /**
     * The content leaves everything that holds it, with no model call: each summary built from
     * the entry is rewritten from its other sources by the extractive merge, or removed and
     * flagged when it cannot be rebuilt; links through the entry are undone; the entry leaves
     * both tiers and the query log. The rewrite is not final: `forgetDerived` finds the
     * summary again and has the summariser word it.
     */
    async forgetEntry(
      input: ForgetStep,
    ): Promise<{ removed: string[]; restored: string[]; tiers: Tier[]; queriesRemoved: number }> {
      input = parseInput(forgetDerivedSchema, input, 'forget');
      await doubtHotCountIfRetried(store, input.agentId);
      const derived = await eachDerivedSummary(input, async (summary, sources) => {
        const merged = extractiveSummary(sources.map((s) => ({ id: s._id, text: s.text })));
        await rewrite(input, summary, sources, merged, false);
      });
      // The entry may itself be a summary: what leaned on it no longer can.
      await unlinkSummary(store, input.agentId, input.entryId);
      const restored = await unlinkSupersession(store, input.agentId, input.entryId, input.at);
      const tiers = await deleteEntry(store, input.agentId, input.entryId);
      const queriesRemoved = await eraseFromQueryLog(store, input.agentId, input.entryId);
      return {
        removed: derived.removed,
        restored,
        tiers,
        queriesRemoved: queriesRemoved + derived.queriesRemoved,
      };
    },

    /**
     * Every summary still built from the entry is worded anew by the summariser from its other
     * sources, when they all still stand, or else removed and flagged (another erasure claimed
     * one since).
     */
    async forgetDerived(
      input: ForgetStep,
    ): Promise<{ resummarised: string[]; removed: string[]; queriesRemoved: number }> {
      input = parseInput(forgetDerivedSchema, input, 'forget');
      await doubtHotCountIfRetried(store, input.agentId);
      const resummarised: string[] = [];
      const { removed, queriesRemoved } = await eachDerivedSummary(input, async (summary, sources) => {
        const text = await summariser.summarise(sources.map((s) => ({ id: s._id, text: s.text })));
        await rewrite(input, summary, sources, text, true);
        resummarised.push(summary._id);
        heartbeat(summary._id);
      });
      // The last step: the entry, the query log and every summary built from it are clean.
      await endErasure(store, input.agentId, input.entryId);
      return { resummarised, removed, queriesRemoved };
    },
  };
}
