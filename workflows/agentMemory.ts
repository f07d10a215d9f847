import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  defineUpdate,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import {
  agentIdSchema,
  encodedBytes,
  MAX_WRITE_BYTES,
  type WriteLimits,
  type WriteRequestInput,
} from '../core/entry';
import { isSealedWrite, parseWriteUpdate, type SealedWrite, type WriteUpdate } from '../core/sealed';
import { InvalidInputError, isMemgateErrorType } from '../core/errors';
import { entryIdSchema, MAX_EMBED_IDS, parseInput } from '../core/messages';
import { writeLimitsOf, type Policy } from '../core/policy';
import { z } from 'zod';
import { asApplicationFailure } from '../core/failures';
import { handOverSuggested, handOverToCurrentVersion, wakeOnHandOverSignal } from './support';
import type { InvalidWrite, PersistOutcome, WriteResult } from '../core/messages';
import type { WriteActivities } from '../activities';

/** Ids a run hands over to the next one to embed; beyond it, the night embeds them. */
const MAX_CARRIED_UNEMBEDDED = 2_000;

/**
 * The run embeds once the agent's writes have paused this long (no batch persisted in it),
 * so a burst is acknowledged as fast as with no embeddings at all (docs/invariants.md,
 * Writes come first). One timer a pause, not one a write: a write cancels nothing.
 */
export const EMBED_AFTER_QUIET_MS = 1_000;
/** Under writes that never pause, an entry waits at most this long for its vector. */
export const EMBED_MAX_WAIT_MS = 60_000;
/**
 * While writes go on, the run looks for their pause again at doubling intervals up to this:
 * a burst of a minute wakes it ten times rather than sixty (each a workflow task the writes
 * share the cores with), and its entries wait at most this long past the pause.
 */
export const EMBED_RECHECK_MAX_MS = 8_000;
/** Runs that began before the doubling intervals keep looking once a second (docs/versioning.md). */
const EMBED_RECHECK_DOUBLES = 'embed-recheck-doubles';
/**
 * A run whose registration or policy read fails every attempt fails the writes waiting on it
 * and goes on; before this change such a run failed (docs/versioning.md).
 */
const OUTLIVES_STORE_OUTAGE = 'outlives-store-outage';
/**
 * A run that waits for its policy (the store down as it began) hands over when due, as one
 * that has read it does; before this change it stayed on its version until the store answered
 * (docs/versioning.md).
 */
const HANDS_OVER_UNREAD = 'hands-over-unread';
/**
 * The run embeds the entries a write found stored as well as those it created: a persist
 * retried after its first attempt stored them finds them so, with their vectors still to make
 * (docs/versioning.md). Before this change, the night embedded them.
 */
const EMBEDS_EXISTING = 'embeds-existing';

export const agentMemoryInputSchema = z.strictObject({
  agentId: agentIdSchema,
  /**
   * Hand over to a new run after this many persisted batches, before the server suggests it:
   * how tests reach the hand-over (as Temporal's samples do). Unset in production.
   */
  continueAsNewAfterBatches: z.number().int().positive().optional(),
  /** Entries the previous run created and had not embedded yet when it handed over. */
  unembedded: z.array(entryIdSchema).max(MAX_CARRIED_UNEMBEDDED).optional(),
});
export type AgentMemoryInput = z.output<typeof agentMemoryInputSchema>;

/**
 * Vectors, after the acknowledgement (dual-phase): an activity of its own, retried and
 * visible in the Temporal UI, which never holds a write back. An endpoint that stays down
 * leaves the entries' `embed` work to the night.
 */
const { embedEntries } = proxyActivities<WriteActivities>({
  // Long, as the night's activities: a pause's worth of long entries can take the local
  // default many minutes (docs/benchmarks.md, bench/embeddings), and each request is bounded
  // by the embedder's own timeout. The heartbeat notices a lost worker.
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '20 seconds',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '30 seconds',
    maximumAttempts: 5,
    nonRetryableErrorTypes: ['InvalidInput', 'InvalidConfig'],
  },
});

/**
 * Before a run has read the stored policy (its first moments), a write is checked for shape
 * and bytes only; the handler checks it against the policy's limits once it is read.
 */
const UNREAD_LIMITS: WriteLimits = {
  maxTextChars: Number.MAX_SAFE_INTEGER,
  maxEntriesPerWrite: Number.MAX_SAFE_INTEGER,
};

/**
 * The failure type of a write turned away while the run hands its history over to the next
 * one; the client sends the write again, and the next run takes it.
 */
export const RUN_ENDING = 'RunEnding';

export type { WriteResult };

export const writeUpdate = defineUpdate<WriteResult, [WriteRequestInput | SealedWrite]>('write');

export function agentMemoryWorkflowId(agentId: string): string {
  return `memgate-agent-${agentId}`;
}

// A local activity: the batch is persisted inside the workflow task that accepted it, so an
// acknowledgement costs one workflow task instead of three server round trips. It is still
// retried by Temporal and recorded in history (as a marker).
// Bounded: a batch that keeps failing fails its Updates (typed, so the caller can retry the
// same ids) instead of stalling the agent's workflow and every write queued behind it.
const { persistWrites, registerAgent, currentPolicy } = proxyLocalActivities<WriteActivities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    maximumInterval: '5 seconds',
    maximumAttempts: 5,
    nonRetryableErrorTypes: ['InvalidInput', 'InvalidConfig'],
  },
});

/**
 * What a failed persist tells each waiting Update: its own typed failure, else "retry later".
 * Any other error reaches here as an ApplicationFailure too (the SDK types it by the error's
 * class name), so only a type of the closed list passes through.
 */
function persistFailure(err: unknown): Error {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure && isMemgateErrorType(cause.type)) return cause;
  return ApplicationFailure.create({
    type: 'StackUnavailable',
    message: `the write could not be persisted; retrying it is safe: ${(err as Error).message}`,
    nonRetryable: false,
  });
}

/**
 * A write the persist refused on its own (its entries, once opened), as its Update fails:
 * InvalidInput, as a MemgateError leaves a workflow (core/failures.ts).
 */
function invalidWrite(outcome: InvalidWrite): ApplicationFailure {
  return ApplicationFailure.create({
    type: 'InvalidInput',
    message: outcome.invalid.message,
    details: [{ issues: outcome.invalid.issues }],
    nonRetryable: true,
  });
}

/** Entries persisted by one activity call; many small writes share one round trip. */
const MAX_BATCH_ENTRIES = 500;

interface Pending {
  request: WriteUpdate;
  /** As it travels: one activity call's input stays under MAX_WRITE_BYTES, like an Update. */
  bytes: number;
  done: (result: PersistOutcome | Error) => void;
}

/**
 * One workflow per agent. Writes arrive as Updates; the validator rejects bad input before
 * it reaches history, and each Update completes only when its entries are durable.
 */
export async function agentMemory(raw: AgentMemoryInput): Promise<void> {
  let input: AgentMemoryInput;
  try {
    input = parseInput(agentMemoryInputSchema, raw, 'agent memory');
  } catch (err) {
    throw asApplicationFailure(err);
  }
  // The stored policy as this run found it: its limits and decay apply to every write the run
  // takes (docs/invariants.md, One policy); the next run reads it again, so a change reaches
  // the agent there.
  let policy: Policy | undefined = undefined;
  const pending: Pending[] = [];
  let registered = false;
  let batches = 0;
  // The task time of the last batch taken in (a workflow's clock, recorded in history).
  let lastBatchAt = 0;
  // Set once the run has decided to continue as new: no write is taken in after that.
  let ending = false;
  // Reads of the policy that failed every attempt, the last one's failure as its waiting
  // writes fail, and every write that has waited for a read.
  let policyReadsFailed = 0;
  let policyUnread: Error | undefined = undefined;
  let writesAwaitingPolicy = 0;
  const handOverDue = () =>
    handOverSuggested() ||
    (input.continueAsNewAfterBatches !== undefined && batches >= input.continueAsNewAfterBatches);

  setHandler(
    writeUpdate,
    async (raw) => {
      // Date.now() in a workflow is the time of the task, recorded in history.
      const now = Date.now();
      // Only a write that comes before the run has read its policy waits: a condition costs
      // the workflow's thread promises and a check at each activation, on every write's path.
      // It waits for the next read, and fails with it.
      if (policy === undefined) {
        const failed = policyReadsFailed;
        writesAwaitingPolicy++;
        await condition(() => policy !== undefined || policyReadsFailed > failed);
        if (policy === undefined) throw policyUnread!;
      }
      let request: WriteUpdate;
      try {
        request = parseWriteUpdate(raw, writeLimitsOf(policy!), now);
      } catch (err) {
        throw asApplicationFailure(err);
      }
      // Fixed here, inside history, so a retried persist derives the same ids (a sealed
      // entry's was fixed by the client that sealed it).
      if (!isSealedWrite(request)) for (const e of request.entries) e.writtenAt ??= now;
      const result = await new Promise<PersistOutcome | Error>((done) =>
        pending.push({ request, bytes: encodedBytes(request), done }),
      );
      if (result instanceof Error) throw result;
      if ('invalid' in result) throw invalidWrite(result);
      return { entries: result };
    },
    {
      validator: (raw) => {
        if (ending) {
          throw ApplicationFailure.create({
            type: RUN_ENDING,
            message: 'this run is handing over to the next; send the write again',
            nonRetryable: false,
          });
        }
        try {
          const limits = policy ? writeLimitsOf(policy) : UNREAD_LIMITS;
          const request = parseWriteUpdate(raw, limits, Date.now());
          if (request.agentId !== input.agentId) {
            throw new InvalidInputError(
              `write for agent ${request.agentId} sent to the workflow of agent ${input.agentId}`,
            );
          }
        } catch (err) {
          throw asApplicationFailure(err);
        }
      },
    },
  );

  wakeOnHandOverSignal();

  // Created entries awaiting their vector, and those the embedding call in flight holds.
  const unembedded: string[] = [...(input.unembedded ?? [])];
  let embedding: string[] = [];
  // A worker with no embeddings endpoint says so; this run then stops asking (each call
  // would cost the server an activity for nothing) and the night embeds the entries.
  let embeddingUnavailable = false;
  const untilWritesPause = async (): Promise<void> => {
    const due = Date.now() + EMBED_MAX_WAIT_MS;
    if (patched(EMBED_RECHECK_DOUBLES)) {
      // Quiet is a second without a batch, however long the last look waited.
      for (let wait = EMBED_AFTER_QUIET_MS; ; wait = Math.min(2 * wait, EMBED_RECHECK_MAX_MS)) {
        await sleep(Math.min(wait, due - Date.now()));
        if (Date.now() - lastBatchAt >= EMBED_AFTER_QUIET_MS || Date.now() >= due) return;
      }
    }
    let seen: number;
    do {
      seen = batches;
      await sleep(EMBED_AFTER_QUIET_MS);
    } while (batches !== seen && Date.now() < due);
  };
  const embedLane = async (): Promise<void> => {
    while (!embeddingUnavailable) {
      await condition(() => unembedded.length > 0);
      await untilWritesPause();
      embedding = unembedded.splice(0, MAX_EMBED_IDS);
      try {
        const outcome = await embedEntries({ agentId: input.agentId, ids: embedding });
        if ('unavailable' in outcome) {
          embeddingUnavailable = true;
          unembedded.length = 0;
        }
      } catch {
        // Tried and recorded in history; the entries keep their `embed` work for the night.
      }
      embedding = [];
    }
  };
  void embedLane();

  // A store down as the run begins does not end it (OUTLIVES_STORE_OUTAGE). A read that fails
  // every attempt fails the writes waiting on it, typed and retryable as a failed persist
  // does, rather than holding them to their deadline; the run reads again when the next write
  // comes. An idle run sets no timer, a write sent once the store is back is taken, and the
  // ids carried over stay the run's to embed.
  const handOver = (): Promise<never> => {
    const carried = [...embedding, ...unembedded].slice(0, MAX_CARRIED_UNEMBEDDED);
    const { unembedded: _previous, ...rest } = input;
    return handOverToCurrentVersion<typeof agentMemory>()(
      carried.length ? { ...rest, unembedded: carried } : rest,
    );
  };
  const readPolicy = async (): Promise<Policy> => {
    for (;;) {
      try {
        return await currentPolicy();
      } catch (err) {
        if (!patched(OUTLIVES_STORE_OUTAGE)) throw err;
        policyUnread = persistFailure(err);
        policyReadsFailed++;
        const waited = writesAwaitingPolicy;
        const handsOver = patched(HANDS_OVER_UNREAD);
        await condition(() => writesAwaitingPolicy > waited || (handsOver && handOverDue()));
        // A write waiting reads again; with none, the run hands over once the writes that
        // waited for the failed read have failed with it.
        if (writesAwaitingPolicy === waited) {
          ending = true;
          await condition(allHandlersFinished);
          await handOver();
        }
      }
    }
  };
  const takeBatch = (): Pending[] => {
    const batch: Pending[] = [];
    let size = 0;
    let bytes = 0;
    while (
      pending.length > 0 &&
      (batch.length === 0 ||
        (size + pending[0]!.request.entries.length <= MAX_BATCH_ENTRIES &&
          bytes + pending[0]!.bytes <= MAX_WRITE_BYTES))
    ) {
      const next = pending.shift()!;
      batch.push(next);
      size += next.request.entries.length;
      bytes += next.bytes;
    }
    return batch;
  };

  policy = await readPolicy();
  for (;;) {
    await condition(() => pending.length > 0 || handOverDue());
    if (handOverDue()) {
      // Under a steady stream of writes there is never a moment with none pending, so the
      // run stops taking writes in (they are sent again, to the next run), finishes those it
      // accepted, and only then hands its history over.
      ending = true;
      await condition(() => pending.length > 0 || allHandlersFinished());
      if (pending.length === 0) await handOver();
    }
    // Once per run, before its first write: the nightly run fans out over registered agents.
    if (!registered) {
      try {
        await registerAgent(input.agentId);
        registered = true;
      } catch (err) {
        if (!patched(OUTLIVES_STORE_OUTAGE)) throw err;
        // As a persist that failed every attempt: a batch fails, and the next registers again.
        for (const p of takeBatch()) p.done(persistFailure(err));
        continue;
      }
    }
    const batch = takeBatch();
    batches++;
    lastBatchAt = Date.now();
    try {
      const results = await persistWrites(
        batch.map((p) => p.request),
        policy,
      );
      batch.forEach((p, i) => p.done(results[i]!));
      const embedsExisting = patched(EMBEDS_EXISTING);
      for (const outcome of results) {
        if ('invalid' in outcome || embeddingUnavailable) continue;
        for (const e of outcome) {
          // One already embedded costs the activity a read, and nothing more.
          if (e.status === 'created' || (embedsExisting && e.status === 'existing')) unembedded.push(e.id);
        }
      }
    } catch (err) {
      batch.forEach((p) => p.done(persistFailure(err)));
    }
  }
}
