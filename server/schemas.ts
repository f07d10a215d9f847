import { z } from 'zod';
import { agentIdSchema, epochMs, writeRequestSchema, type WriteLimits } from '../core/entry';
import { entryIdSchema, restoreInputSchema, verifyRequestSchema } from '../core/messages';
import { recallRequestSchema } from '../core/recall';
import { agentsRequestSchema, entriesRequestSchema, nightsRequestSchema } from '../core/browse';
import { COUNT_FIELDS, NIGHT_PHASES } from '../core/nightly/registry';
import {
  admitSchema,
  advanceTurnSchema,
  pinRequestSchema,
  pinSchema,
  rehydrateSchema,
  sessionIdSchema,
  unpinSchema,
  windowSettingsSchema,
  type Refusal,
} from '../core/window';
import type { MemgateClient } from '../client/client';
import type { WindowClient } from '../client/window';
import { STATUS_BY_TYPE, type HttpErrorType } from './errors';

/**
 * The HTTP API's shapes. Requests are the client's own schemas (core/entry.ts, core/recall.ts,
 * core/messages.ts, core/window), with the ids the path carries taken out of the body; the
 * handlers validate with them, and the OpenAPI document is generated from them. Results are
 * described here in zod beside the TypeScript types they stand for: each schema is typed by
 * the client's result, so a field the client stops returning fails compilation here.
 */

// Requests.

export const agentParams = z.strictObject({ agentId: agentIdSchema });
export const entryParams = z.strictObject({ agentId: agentIdSchema, entryId: entryIdSchema });
export const sessionParams = z.strictObject({ sessionId: sessionIdSchema });

/** The client's write request; `agentId` may be left out, as the path names the agent. */
export function writeBodySchema(limits: WriteLimits) {
  return writeRequestSchema(limits).partial({ agentId: true });
}

export const recallBodySchema = recallRequestSchema.partial({ agentId: true });

export const restoreBodySchema = restoreInputSchema.pick({ freshUntil: true });

/** The memory browser's reads (docs/browser.md): the client's own request schemas, the path's ids taken out. */
export const agentsQuery = agentsRequestSchema;
export const nightsQuery = nightsRequestSchema.omit({ agentId: true });
export const entriesQuery = entriesRequestSchema.omit({ agentId: true });

/** `memgate verify` and `memgate impossible` take one agent or every agent. */
export const agentQuery = verifyRequestSchema;

/** What `WindowClient.open` takes: the settings a session may choose (client/window.ts). */
export const openWindowBodySchema = windowSettingsSchema
  .omit({ pinGuard: true, retainedEvictions: true })
  .partial();

export { admitSchema, advanceTurnSchema, pinRequestSchema, rehydrateSchema, unpinSchema };

// Results.

type Result<F extends (...args: never[]) => Promise<unknown>> = Awaited<ReturnType<F>>;
type Memgate = MemgateClient;
type Windows = WindowClient;

const ids = z.array(z.string());
const tier = z.enum(['hot', 'cold']);

export const writeResultSchema: z.ZodType<Result<Memgate['write']>> = z.object({
  entries: z.array(z.object({ id: z.string(), status: z.enum(['created', 'existing', 'deleted']) })),
});

const provenance = z.object({
  origin: z.enum(['user', 'agent', 'tool', 'consolidation']),
  sessionId: z.string().optional(),
  turn: z.number().int().optional(),
  ref: z.string().optional(),
});

const successor = z.object({
  id: z.string(),
  text: z.string(),
  kind: z.enum(['episode', 'fact', 'constraint', 'summary']),
  tier,
  dormant: z.boolean().describe('below the gate now: only deep recall returns it'),
  salience: z.number(),
  score: z.number(),
  lossy_summary: z.boolean(),
  isActive: z.boolean(),
  supersededBy: z.string().optional(),
  supersedes: z.string().optional(),
  expired: z.boolean(),
  source: provenance,
  writtenAt: epochMs,
});

const recallHit = successor.extend({
  foundBy: z
    .enum(['lexical', 'semantic', 'both'])
    .describe('whether its words, its meaning (embedding) or both found it'),
  similarity: z
    .number()
    .optional()
    .describe('cosine similarity to the query, when the semantic ranking held it'),
});

const retrieval = z
  .discriminatedUnion('mode', [
    z.object({
      mode: z.literal('hybrid'),
      model: z.string(),
      otherModelVectors: z
        .number()
        .int()
        .describe(
          'entries embedded by another model, or by the same at other dimensions: found lexically only until `memgate reembed`',
        ),
      badVectors: z
        .number()
        .int()
        .describe(
          'entries whose stored vector is unusable (not finite, zero, of the wrong length): skipped, found lexically only',
        ),
      filteredNeighbours: z
        .number()
        .int()
        .describe(
          "nearest neighbours default recall's filter (tier, gate, activity, expiry) rejected inside the search: none was read",
        ),
      queryEmbeddingMs: z.number(),
      indexCatchingUp: z
        .boolean()
        .describe(
          "the agent's vector index was still reading changes when recall stopped waiting for it: entries embedded since may be found by words only",
        ),
    }),
    z.object({ mode: z.literal('lexical'), reason: z.string().describe('why recall was lexical only') }),
  ])
  .describe('hybrid (lexical and semantic, fused), or lexical only and why');

const standIn = z.object({
  summaryId: z.string(),
  lossy: z.boolean(),
  erased: z.boolean().optional(),
  retired: z.boolean().optional(),
});

export const recallResultSchema: z.ZodType<Result<Memgate['recall']>> = z.object({
  hits: z.array(recallHit),
  retrieval,
  missing: z
    .array(
      z.object({
        tombstoneId: z.string(),
        deletedAt: epochMs,
        reason: z.string(),
        standIn: standIn.optional(),
        matchedTerms: z.array(z.string()),
      }),
    )
    .optional()
    .describe('deep recall only: deleted entries whose terms match the query'),
  asOf: epochMs,
  candidates: z.number().int(),
  candidatesOverBudget: z
    .number()
    .int()
    .optional()
    .describe(
      'candidates read but not ranked: their text passed the most one recall ranks; absent when all were',
    ),
  successors: z
    .array(successor)
    .optional()
    .describe('deep recall only: the entries that superseded a hit, each chain to its current fact'),
});

export const forgetResultSchema: z.ZodType<Result<Memgate['forget']>> = z.object({
  entryId: z.string(),
  resummarised: ids,
  removed: ids,
  restored: ids,
  tiers: z.array(tier).describe('the tiers the entry left; empty when it was already erased'),
  queriesRemoved: z.number().int(),
});

export const eraseAgentResultSchema: z.ZodType<Result<Memgate['eraseAgent']>> = z.object({
  agentId: z.string(),
  workflowsClosed: z
    .number()
    .int()
    .describe('its workflows that were running, terminated (their histories deleted)'),
  tombstoned: z.number().int().describe('ids newly behind a content-free erasure tombstone'),
  entriesRemoved: z.number().int().describe('entry copies, summaries among them, deleted from hot and cold'),
  vectorsCleared: z.number().int(),
  queriesRemoved: z.number().int(),
  ledgerRemoved: z.number().int(),
  termStatsRemoved: z.number().int(),
  runsRemoved: z.number().int(),
  keysRevoked: ids.describe('the API keys whose pattern named this agent alone'),
});

export const restoreResultSchema: z.ZodType<Result<Memgate['restore']>> = z.object({
  id: z.string(),
  tier,
  restored: z.array(z.enum(['supersession', 'expiry'])),
});

/** One line of an agent's export, `GET /v1/agents/{agentId}/export` (core/exportFormat.ts). */
export { exportLineSchema } from '../core/exportFormat';

export const verifyReportSchema: z.ZodType<Result<Memgate['verify']>> = z.object({
  ok: z.boolean(),
  agents: z.number().int(),
  checked: z.object({ ids: z.number().int(), tombstones: z.number().int() }),
  findings: z.array(
    z.object({
      check: z.enum([
        'unaccounted',
        'in-both-tiers',
        'resurrected',
        'erased-content',
        'stand-in-missing',
        'stand-in-inactive',
        'stand-in-not-lossless',
        'summary-not-current',
        'erased-in-vector-index',
        'unreadable-vector-index',
        'erased-in-temporal-history',
        'term-overcounted',
      ]),
      agentId: z.string(),
      id: z.string(),
      detail: z.string(),
    }),
  ),
});

const impossibleQuery = z.object({
  queryId: z.string(),
  agentId: z.string(),
  query: z.string(),
  at: epochMs,
  missing: z.array(z.object({ tombstoneId: z.string(), deletedAt: epochMs, standIn: standIn.optional() })),
});

/** `memgate impossible`: queries whose deep recall matched deleted evidence, by deletion reason. */
export const impossibleReportSchema = z.object({
  agentId: z.string().optional(),
  queries: z.number().int().describe('distinct queries in the groups'),
  omitted: z
    .number()
    .int()
    .optional()
    .describe(
      'older queries that missed evidence too, past the newest 1,000 the report lists; absent when none',
    ),
  groups: z.array(
    z.object({
      reason: z.string(),
      tombstones: z.number().int().describe('deleted entries of this reason that some query missed'),
      queries: z.array(impossibleQuery),
    }),
  ),
});
export type ImpossibleReport = z.output<typeof impossibleReportSchema>;
export type ImpossibleGroups = ImpossibleReport['groups'];

// The memory browser's results.

export const agentListSchema: z.ZodType<Result<Memgate['agents']>> = z.object({
  agents: z.array(z.object({ agentId: z.string(), firstWriteAt: epochMs })),
  next: z.string().optional().describe('the `after` of the next page; absent on the last'),
});

const count = z.number().int();

const censusSchema = z
  .object({
    asOf: epochMs,
    hot: z.object({
      active: count.describe('current entries above the gate past the day of `asOf`'),
      reachingGate: count.describe('current entries that reach the gate on the day of `asOf`'),
      dormant: count.describe('current entries below the gate since an earlier day'),
      superseded: count,
      expired: count,
      inactive: count.describe('inactive for another reason: summaries retired when a source was superseded'),
    }),
    cold: count,
    summaries: z.object({ lossy: count, lossless: count }).describe('summaries in either tier'),
    tombstones: z.record(z.string(), count).describe('tombstones by reason'),
  })
  .describe('entries counted by the store (each from the night that counts its terms), by tier and state');

export const agentViewSchema: z.ZodType<Result<Memgate['agent']>> = z.object({
  agentId: z.string(),
  firstWriteAt: epochMs,
  census: censusSchema,
  policy: z
    .object({ halfLifeHours: z.number(), gateThreshold: z.number() })
    .describe("how the agent's salience decays, and the gate below which an entry is dormant"),
});

export const nightListSchema: z.ZodType<Result<Memgate['nights']>> = z.object({
  nights: z.array(
    z.object({
      runId: z.string(),
      workflowId: z.string().describe("the run's consolidateAgent workflow in Temporal"),
      asOf: epochMs,
      finishedAt: epochMs,
      counts: z.record(z.string(), count).describe(`what each phase did: ${COUNT_FIELDS.join(', ')}`),
      durations: z
        .partialRecord(z.enum(NIGHT_PHASES.map((p) => p.name)), count)
        .optional()
        .describe('milliseconds per phase; absent from runs recorded before they were kept'),
      census: censusSchema.optional().describe('absent from runs recorded before it was kept'),
    }),
  ),
  next: epochMs.optional().describe('the `before` of the next page; absent on the last'),
});

const entryState = z.enum(['active', 'dormant', 'superseded', 'expired', 'inactive', 'cold']);
const kind = z.enum(['episode', 'fact', 'constraint', 'summary']);

export const entryListSchema: z.ZodType<Result<Memgate['entries']>> = z.object({
  entries: z.array(
    z.object({
      id: z.string(),
      tier,
      kind,
      text: z.string().describe('its first 160 characters'),
      state: entryState,
      salience: z.number().describe('salience now'),
      lossy_summary: z.boolean().optional(),
      writtenAt: epochMs,
    }),
  ),
  next: z.string().optional().describe('the `cursor` of the next page; absent on the last'),
});

const salience = z.object({ base: z.number(), at: epochMs });

const shownEntrySchema = z.object({
  _id: z.string(),
  kind,
  text: z.string(),
  tokens: count,
  atoms: z.array(z.string()).describe('its fact atoms (numbers with units, dates, names…)'),
  source: provenance,
  writtenAt: epochMs,
  salience,
  salienceNow: z.number(),
  dormantAt: z.number().describe('when its salience reaches the gate (epoch milliseconds)'),
  confidence: z.number(),
  verified: z.boolean(),
  corroborations: z.array(z.object({ source: z.string(), at: epochMs })),
  validity: z.object({ volatile: z.boolean(), freshUntil: epochMs.optional() }),
  expiredAt: epochMs.optional(),
  subject: z.string().optional(),
  attribute: z.string().optional(),
  isActive: z.boolean(),
  supersededBy: z.string().optional(),
  supersedes: z.string().optional(),
  restoredAt: epochMs.optional(),
  derivedFrom: ids.optional().describe('a summary: the entries it summarises'),
  lossy_summary: z.boolean().optional(),
  lossyReasons: z.array(z.string()).optional(),
  subsumedBy: z.array(z.object({ summaryId: z.string(), lossless: z.boolean() })).optional(),
  refreshedAt: epochMs.optional(),
  spilledAt: epochMs.optional(),
  pending: z.array(z.enum(['terms', 'cluster', 'supersede', 'expire', 'embed'])).optional(),
  embeddedWith: z.string().optional(),
  version: count,
  tier,
  state: entryState,
});

export const entryViewSchema: z.ZodType<Result<Memgate['entry']>> = z.object({
  entryId: z.string(),
  entry: shownEntrySchema.optional().describe('absent once the entry is deleted'),
  tombstone: z
    .object({
      _id: z.string(),
      terms: z.array(z.string()),
      reason: z.string(),
      deletedAt: epochMs,
      standIn: standIn.optional(),
      subject: z.string().optional(),
      attribute: z.string().optional(),
      writtenAt: epochMs.optional(),
      atoms: z.array(z.string()).optional(),
      runId: z.string().optional(),
    })
    .optional()
    .describe('what its deletion left'),
  lifecycle: z
    .array(
      z.object({
        at: epochMs,
        event: z.string(),
        reason: z.string(),
        runId: z.string().optional(),
        inputs: z.record(z.string(), z.unknown()).optional(),
      }),
    )
    .describe('written, then its ledger records (kept `MEMGATE_LEDGER_RETENTION_DAYS`), oldest first'),
  standIns: z
    .array(
      z.object({
        summaryId: z.string(),
        tier: tier.optional(),
        text: z.string().optional(),
        lossy: z.boolean(),
        isActive: z.boolean().optional(),
        keeps: z.array(z.string()).describe("the entry's atoms the summary's text holds"),
        lacks: z.array(z.string()).describe('those it does not'),
      }),
    )
    .describe('the summaries that stand in for it'),
});

const interval = z.object({ low: z.number(), high: z.number() });

export const auditRunSchema: z.ZodType<Result<Memgate['lastAudit']>> = z.object({
  runId: z.string(),
  at: epochMs,
  title: z.string(),
  rows: z.array(
    z.object({
      arm: z.string(),
      budget: count.nullable(),
      readSetting: z.enum(['retained', 'hot', 'hot+cold']),
      condition: z.enum(['forced-gold', 'top-60']),
      reader: z.string(),
      judge: z.string(),
      questions: count,
      denominator: count,
      errors: count,
      irreversible: count,
      recoverable: count,
      residual: count,
      negativeRestores: count,
      irreversibleShare: z.number().nullable(),
      interval: interval.nullable(),
      irreversibleRate: z.number().nullable(),
      goldEvictedRate: z.number(),
      violations: z.object({
        survivingGoldFixedIrreversible: count,
        wholeStoreFixedIrreversible: count,
        placeboFlips: count,
      }),
      note: z.string().optional(),
    }),
  ),
});

const segmentRef = z.object({
  id: z.string(),
  tokens: z.number().int(),
  salience: z.number(),
  label: z.string().optional(),
});

const segment = z.object({
  id: z.string(),
  tokens: z.number().int(),
  salience: z.number(),
  label: z.string().optional(),
  pins: z.array(pinSchema),
  admittedAtTurn: z.number().int(),
  via: z.enum(['admit', 'rehydrate']),
  displaced: ids,
});

const evictionRecord = z.object({
  segmentId: z.string(),
  tokens: z.number().int(),
  salience: z.number(),
  label: z.string().optional(),
  turn: z.number().int(),
  displacedBy: z.string(),
  displacerPinned: z.boolean(),
  displacerPins: z.array(pinSchema),
});

const pinRef = z.object({ segmentId: z.string(), pin: pinSchema });

export const windowViewSchema: z.ZodType<Result<Windows['show']>> = z.object({
  turn: z.number().int(),
  settings: windowSettingsSchema.required(),
  used: z.number().int(),
  free: z.number().int(),
  occupancy: z.number(),
  segments: z.array(segment),
  evictions: z.array(evictionRecord),
  evictionsDropped: z.number().int(),
});

export const entryResultSchema: z.ZodType<Result<Windows['admit']>> = z.object({
  turn: z.number().int(),
  mode: z.enum(['slack', 'neverAdmitted', 'swap', 'evict']),
  segment,
  evicted: z.array(evictionRecord),
  used: z.number().int(),
});

export const segmentSchema: z.ZodType<Result<Windows['pin']>> = segment;
export const unpinResultSchema: z.ZodType<Result<Windows['unpin']>> = z.object({ released: z.array(pinRef) });
export const turnResultSchema: z.ZodType<Result<Windows['advanceTurn']>> = z.object({
  turn: z.number().int(),
  lapsed: z.array(pinRef),
});
export const windowSummarySchema: z.ZodType<Result<Windows['close']>> = z.object({
  turn: z.number().int(),
  segments: z.number().int(),
  used: z.number().int(),
  evictions: z.number().int(),
});

/** RehydrationBlocked's details: the refusal, with what stands in the way. */
export const refusalSchema: z.ZodType<Refusal> = z.object({
  operation: z.enum(['admit', 'rehydrate']),
  turn: z.number().int(),
  reasons: z.array(
    z.enum([
      'belowThreshold',
      'evictedByLivePin',
      'neverAdmittedAtCapacity',
      'wouldDisplacePinned',
      'marginNotMet',
      'noUnpinnedRoom',
    ]),
  ),
  incoming: segmentRef,
  wouldDisplace: z.array(segmentRef.extend({ pinned: z.boolean() })),
  pins: z.array(pinRef),
});

/** Every type an error may carry: the keys of the type → status table, so the two cannot drift. */
const errorTypes = Object.keys(STATUS_BY_TYPE) as [HttpErrorType, ...HttpErrorType[]];

export const errorSchema = z.object({
  error: z.object({
    type: z.enum(errorTypes),
    message: z.string(),
    details: z
      .record(z.string(), z.unknown())
      .describe(
        'InvalidInput: `issues`, each a dotted `path` and a `message`; RehydrationBlocked: the refusal (reasons, incoming, wouldDisplace, pins)',
      ),
  }),
});

export const healthSchema = z.object({ status: z.literal('ok') });

/** A payload in Temporal's codec-server protocol: each metadata value and the data in base64. */
const wirePayloadSchema = z.object({
  metadata: z.record(z.string(), z.base64()).optional(),
  data: z.base64().optional(),
});

/** What `/codec/encode` and `/codec/decode` take and answer. */
export const codecPayloadsSchema = z.object({ payloads: z.array(wirePayloadSchema).max(1_000) });

export const readySchema = z.object({
  status: z.enum(['ready', 'unavailable']),
  checks: z.record(z.string(), z.object({ ok: z.boolean(), error: z.string().optional() })),
});
