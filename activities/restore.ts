import { NotFoundError } from '../core/errors';
import { parseInput, restoreStepSchema, type RestoreResult } from '../core/messages';
import type { Store } from '../store/db';
import { restoreEntry } from '../store/restore';

/** `memgate restore`: one step, with the instant the workflow fixed for it. */
export function createRestoreActivities(store: Store) {
  return {
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
  };
}
