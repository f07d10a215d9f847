import { z } from 'zod';
import { agentIdSchema, epochMs, zodIssues, type Tier } from './entry';
import { InvalidInputError, type Issue } from './errors';
import { policySchema } from './policy';
import { COUNT_FIELDS, NIGHT_PHASES, type CountField, type NightPhaseName } from './nightly/registry';

/**
 * What every workflow and activity accepts. Each validates its own input with these (the
 * client does too, before sending): a caller of the Temporal API reaches a workflow without
 * the client, and a value that reaches a store query unchecked could be a query operator.
 */

/** An entry id as memgate makes them (base64url digests); never an object, never a `$` operator. */
export const entryIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'an entry id: 1-64 of A-Z a-z 0-9 _ -');

export const consolidateAgentInputSchema = z.strictObject({ agentId: agentIdSchema, asOf: epochMs });
export type ConsolidateAgentInput = z.output<typeof consolidateAgentInputSchema>;

export const runContextSchema = z.strictObject({
  agentId: agentIdSchema,
  asOf: epochMs,
  runId: z.string().min(1).max(300),
});

/** A nightly phase: the run, and the policy the run read once when it started. */
export const phaseInputSchema = runContextSchema.extend({ policy: policySchema });

const tally = z.number().int().min(0);

/** What one agent's nightly run did, phase by phase (core/nightly/registry.ts). */
export const phaseCountsSchema = z.strictObject(
  Object.fromEntries(COUNT_FIELDS.map((field) => [field, tally])) as Record<CountField, typeof tally>,
);
export type PhaseCounts = z.output<typeof phaseCountsSchema>;

/** Milliseconds each phase of a run took that completed, by phase name (a run's record). */
export const phaseDurationsSchema = z.partialRecord(
  z.enum(NIGHT_PHASES.map((p) => p.name) as [NightPhaseName, ...NightPhaseName[]]),
  z.number().int().min(0),
);
export type PhaseDurations = z.output<typeof phaseDurationsSchema>;

export const nightlyRecordSchema = z.strictObject({
  runId: z.string().min(1).max(300),
  asOf: epochMs,
  counts: z.record(z.string().max(64), tally),
});

export const restoreInputSchema = z.strictObject({
  agentId: agentIdSchema,
  entryId: entryIdSchema,
  /** Renew an expired volatile fact until this instant (epoch ms). */
  freshUntil: epochMs.optional(),
});
export type RestoreInput = z.output<typeof restoreInputSchema>;

export const forgetInputSchema = z.strictObject({ agentId: agentIdSchema, entryId: entryIdSchema });
export type ForgetInput = z.output<typeof forgetInputSchema>;

/** A step of erasure or restore, with the instant the workflow fixed for it. */
export const forgetStepSchema = forgetInputSchema.extend({ at: epochMs });
/**
 * A freshUntil not after the restore's time would clear the expiry of a fact still expired.
 * Checked where that time is known: the activity at the workflow's, the client at its own.
 */
export const restoreStepSchema = restoreInputSchema
  .extend({ at: epochMs })
  .refine((r) => r.freshUntil === undefined || r.freshUntil > r.at, {
    error: 'must be after the time of the restore',
    path: ['freshUntil'],
  });
/** Rebuilding the summaries an erased entry fed, under the policy the erasure read. */
export const forgetDerivedSchema = forgetStepSchema.extend({ policy: policySchema });

/** Erasing a whole agent (docs/erasure.md); its steps carry the instant the workflow fixed. */
export const eraseAgentInputSchema = z.strictObject({ agentId: agentIdSchema });
export type EraseAgentInput = z.output<typeof eraseAgentInputSchema>;
export const eraseAgentStepSchema = eraseAgentInputSchema.extend({ at: epochMs });
/** The last step, told whether the steps before it erased anything (then it leaves a ledger record). */
export const eraseAgentRecordsSchema = eraseAgentStepSchema.extend({ erased: z.boolean() });
/**
 * The agent's workflows as the erasure's workflow names them (activities never import
 * workflows): by id, by what every id of a kind begins with, and what precedes a context
 * window's session id. No quote can reach the visibility query they make.
 */
const workflowIdPart = z.string().regex(/^[A-Za-z0-9._:@-]{1,300}$/, 'a workflow id of memgate');
export const agentWorkflowsSchema = eraseAgentInputSchema.extend({
  ids: z.array(workflowIdPart).max(8),
  prefixes: z.array(workflowIdPart).max(8),
  windowIdPrefix: workflowIdPart,
});

/** What erasing an agent removed; all zero (no key) for an agent with nothing stored, or erased already. */
export interface EraseAgentResult {
  agentId: string;
  /** Its workflows still running (memory, context windows, a night or a re-embedding), terminated. */
  workflowsClosed: number;
  /** Ids put behind an erasure tombstone: every id it was given, summaries and evicted ones among them. */
  tombstoned: number;
  /** Entry copies deleted from hot and cold. */
  entriesRemoved: number;
  vectorsCleared: number;
  queriesRemoved: number;
  ledgerRemoved: number;
  termStatsRemoved: number;
  /** Records of its nightly runs. */
  runsRemoved: number;
  /** The keys whose pattern named this agent alone. */
  keysRevoked: string[];
}

/** Ids per embedding call of the agent's workflow: one activity, a few requests to the endpoint. */
export const MAX_EMBED_IDS = 256;

/** The agent's workflow, after a write: vectors for the entries it created. */
export const embedEntriesInputSchema = z.strictObject({
  agentId: agentIdSchema,
  ids: z.array(entryIdSchema).min(1).max(MAX_EMBED_IDS),
});

/**
 * `memgate reembed`: one agent's store, to the embedding space the caller names (the worker
 * must embed in it). The dimensions are optional for runs started before they travelled.
 */
export const reembedInputSchema = z.strictObject({
  agentId: agentIdSchema,
  model: z.string().min(1).max(200),
  dimensions: z.number().int().positive().max(100_000).optional(),
});
export type ReembedInput = z.output<typeof reembedInputSchema>;

/** What an embedding call did: how many entries got their vector, or why none could. */
export type EmbedOutcome = { embedded: number } | { unavailable: string };

export interface ReembedResult {
  agentId: string;
  model: string;
  /** Entries marked to be embedded again (both tiers). */
  marked: number;
  embedded: number;
}

export const verifyRequestSchema = z.strictObject({ agentId: agentIdSchema.optional() });

export const nightlyAgentsInputSchema = z.strictObject({
  after: agentIdSchema.optional(),
  limit: z.number().int().positive().max(1000),
});

/** Pruning the records past their retention, under the night's policy. */
export const pruneInputSchema = z.strictObject({ asOf: epochMs, policy: policySchema });

// Results: what workflows and activities answer, and the client hands back.

/**
 * What happened to one written entry. `existing`: the id is already in hot or cold, left
 * untouched. `deleted`: the id has a tombstone (evicted, or erased by `forget`), so a
 * replayed write does not bring it back.
 */
export type WriteStatus = 'created' | 'existing' | 'deleted';

/** One written entry's id (derived from the write, so a resend gets the same) and status. */
export interface PersistedEntry {
  id: string;
  status: WriteStatus;
}

/**
 * A write of a batch the persisting activity refused for what its entries hold once opened
 * (over the policy's limits, dated ahead, not opening): that write alone fails InvalidInput.
 */
export interface InvalidWrite {
  invalid: { message: string; issues: Issue[] };
}

/**
 * What persisting a batch did with each of its writes: its entries, or its refusal. Histories
 * recorded before refusals were per write hold entries only.
 */
export type PersistOutcome = PersistedEntry[] | InvalidWrite;

/** A write's answer: its entries, in order. */
export interface WriteResult {
  entries: PersistedEntry[];
}

/** One agent's nightly run: the counts per phase and where the memory stands after it. */
export interface ConsolidationReport {
  runId: string;
  agentId: string;
  asOf: number;
  counts: PhaseCounts;
  /** Where the agent's memory stands after the run. */
  store: { hot: number; cold: number; tombstones: number };
}

/** What a restore changed: a supersession undone, an expiry renewed, or both. */
export interface RestoreResult {
  id: string;
  tier: Tier;
  restored: ('supersession' | 'expiry')[];
}

/** Parse or throw InvalidInputError naming `what` and each offending field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid ${what}`, zodIssues(parsed.error));
  return parsed.data;
}
