import { memoryPolicy, type Tier } from '../core/entry';
import { NotFoundError } from '../core/errors';
import { forgetDerivedSchema, forgetInputSchema, forgetStepSchema, parseInput } from '../core/messages';
import { assessSummary, buildSummaryEntry } from '../core/nightly/clusters';
import type { Policy } from '../core/policy';
import type { Summarizer } from '../llm/summarizer';
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
import { deleteEntry, storedEntries } from '../store/nightly';
import { heartbeat } from './liveness';

/** Erasure (docs/invariants.md, Erasure wins), one step per activity; the forget workflow runs them in order. */
export function createForgetActivities(store: Store, summarizer: Summarizer) {
  return {
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
