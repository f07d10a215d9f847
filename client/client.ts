import {
  Client,
  isGrpcDeadlineError,
  Connection,
  WithStartWorkflowOperation,
  WorkflowNotFoundError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import {
  NotFoundError,
  QuotaExceededError,
  StackUnavailableError,
  UnauthenticatedError,
} from '../core/errors';
import {
  agentsRequestSchema,
  entriesCursorText,
  entriesRequestSchema,
  entryRequestSchema,
  listedEntry,
  nightsRequestSchema,
  parseEntriesCursor,
  shownEntry,
  type ListedEntry,
  type ShownEntry,
} from '../core/browse';
import {
  agentNights,
  agentOverview,
  agentsInScope,
  entriesPage,
  entryDetail,
  lastAuditRun,
  pageLevel,
  type AgentOverview,
  type AuditRun,
  type EntryDetail,
  type Night,
} from '../store/browse';
import { assertInScope, type KeyScope } from '../core/keys';
import { authenticate } from '../store/keys';
import {
  claimForKey,
  releaseUnheld,
  releaseWindowClaims,
  settledClaims,
  unrenewedBefore,
} from '../store/quotas';
import type { Config } from '../core/config';
import {
  agentIdSchema,
  memoryPolicy,
  parseWriteRequest,
  type MemoryPolicy,
  type WriteEntry,
  type WriteLimits,
  type WriteRequestInput,
} from '../core/entry';
import { embeddedQueryOf, parseRecallRequest, type RecallRequestInput } from '../core/recall';
import { storeLimitsOf } from '../store/guard';
import { openStore, storeFailure, type QuotaKind, type Store } from '../store/db';
import { adoptPolicy } from '../store/policy';
import { policyOf, writeLimitsOf, type Policy } from '../core/policy';
import { assertAsOfKept, recall, type RecallResult, type SemanticQuery } from '../store/recall';
import { vectorIndexLimitsOf, VectorIndexes } from '../store/vectorIndexes';
import { createEmbedder, type EmbeddingsEndpoint } from '../llm';
import type { Embedder } from '../llm/embedder';
import { referenceVectors } from '../llm/referenceVectors';
import { verifyStore, type VerifyReport } from '../store/verify';
import { exportChunks } from '../store/portable';
import {
  consolidateAgentInputSchema,
  eraseAgentInputSchema,
  forgetInputSchema,
  parseInput,
  restoreInputSchema,
  restoreStepSchema,
  verifyRequestSchema,
  type ConsolidationReport,
  type EraseAgentResult,
  type PersistedEntry,
  type ReembedResult,
  type RestoreResult,
  type WriteResult,
} from '../core/messages';
import { assertNotAhead } from '../core/clock';
import { eraseAgent, eraseAgentWorkflowId } from '../workflows/eraseAgent';
import { forget, forgetWorkflowId } from '../workflows/forget';
import { consolidateAgent } from '../workflows/nightly';
import { consolidateAgentWorkflowId } from '../core/ids';
import { restore, restoreWorkflowId } from '../workflows/restore';
import { reembed, reembedWorkflowId } from '../workflows/reembed';
import { agentMemory, agentMemoryWorkflowId, writeUpdate } from '../workflows/agentMemory';
import { WriteCoalescer } from '../core/writeCoalescer';
import type { SealedWrite } from '../core/sealed';
import { ContentCodec } from '../codec/payloadCodec';
import { sealWrite } from '../codec/sealedEntry';
import { decodeForWire, encodeForWire, type WirePayload } from '../codec/codecServer';
import { erasedInHistory } from './historyCheck';
import { agentsRegistered, countedEntries, registeredAgents } from '../store/agents';
import { openSessions } from './window';
import { temporalConnectionOptions } from '../stack/connection';
import { toMemgateError } from './errors';
import { resending } from './resend';

/**
 * A client call: whatever fails in it, at the store (store/db.ts) or at Temporal
 * (client/errors.ts), reaches the caller as a MemgateError, never a raw driver error.
 */
async function typed<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw asMemgateError(err);
  }
}

function asMemgateError(err: unknown): unknown {
  return storeFailure(err) ?? toMemgateError(err);
}

/** Agents whose workflow this client has seen running; a bound on memory, not a cache policy. */
const MAX_REMEMBERED_AGENTS = 10_000;

/** An agent as the browser opens it: its census now, and how its salience decays to the gate. */
export type AgentView = AgentOverview & { policy: { halfLifeHours: number; gateThreshold: number } };

/** An entry's page: the entry as stored (absent once deleted), its tombstone, lifecycle and stand-ins. */
export type EntryView = Omit<EntryDetail, 'stored'> & { entry?: ShownEntry };

export interface ClientEndpoints {
  temporalAddress: string;
  mongoUri: string;
  embeddings: EmbeddingsEndpoint;
}

/**
 * The typed client for agents. Writes go through the agent's durable workflow; recall is a
 * direct read. Every call validates its input first and throws a MemgateError subclass.
 */
export class MemgateClient {
  private readonly limits: WriteLimits;
  private readonly coalescer: WriteCoalescer<PersistedEntry>;
  private readonly runningAgents = new Set<string>();

  private readonly memory: MemoryPolicy;
  /**
   * The agents' nearest-neighbour indexes this process holds (store/vectorIndexes.ts): a
   * worker in the same process searches these too (worker/worker.ts, createMemgateWorker).
   */
  readonly vectorIndexes: VectorIndexes;
  private readonly embedder: Embedder | undefined;
  private reference: Promise<Float32Array[]> | undefined;
  /** Per agent, the last of its query embeddings (`embedQuery`), settled either way. */
  private readonly queryEmbeddings = new Map<string, Promise<void>>();

  private constructor(
    readonly temporal: Client,
    readonly store: Store,
    private readonly config: Config,
    /** The stored policy as this client found it when it connected (docs/invariants.md, One policy). */
    readonly policy: Policy,
    private readonly embeddings: EmbeddingsEndpoint,
    private readonly codec: ContentCodec,
  ) {
    this.vectorIndexes = new VectorIndexes(store, vectorIndexLimitsOf(config));
    this.embedder = 'queryUrls' in embeddings ? createEmbedder(config, embeddings) : undefined;
    this.limits = writeLimitsOf(policy);
    this.memory = memoryPolicy(policy);
    this.coalescer = new WriteCoalescer(
      (agentId, entries) => this.sendWrite(agentId, entries),
      policy.maxEntriesPerWrite,
    );
  }

  static async connect(config: Config, endpoints: ClientEndpoints): Promise<MemgateClient> {
    const connection = await Connection.connect(
      temporalConnectionOptions(config, endpoints.temporalAddress),
    ).catch((err: unknown) => {
      throw new StackUnavailableError(
        `cannot reach Temporal at ${endpoints.temporalAddress}: ${(err as Error).message}`,
      );
    });
    const store = await openStore(endpoints.mongoUri, config.database, storeLimitsOf(config));
    const codec = new ContentCodec(store);
    const temporal = new Client({
      connection,
      namespace: config.temporalNamespace,
      dataConverter: { payloadCodecs: [codec] },
    });
    const { version, ...policy } = await typed(() => adoptPolicy(store, policyOf(config)));
    void version;
    return new MemgateClient(temporal, store, config, policy, endpoints.embeddings, codec);
  }

  /**
   * Durable soft write of one or more entries; resolves once they are in MongoDB. Invalid
   * input is rejected here, entry by entry, before anything is sent. With `forKey`, the write
   * of a key (HTTP, MCP), the agent counts toward the key's quota (claimForKey).
   */
  async write(request: WriteRequestInput, forKey?: KeyScope): Promise<WriteResult> {
    const now = Date.now();
    const { agentId, entries } = parseWriteRequest(request, this.limits, now);
    // Claimed once the write is known valid: a refused one would hold a place it never used.
    if (forKey) await this.claimForKey(forKey, 'agent', agentId);
    // Fixed before sending, so a resent write derives the same ids.
    for (const e of entries) e.writtenAt ??= now;
    return { entries: await this.coalescer.write(agentId, entries) };
  }

  /**
   * Every call to Temporal for one Update within the write deadline: with no worker taking
   * the agent's workflow (or no server), a write fails typed instead of waiting forever.
   */
  private async withinDeadline<T>(agentId: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await this.temporal.withDeadline(Date.now() + this.config.writeTimeoutMs, fn);
    } catch (err) {
      // The deadline can end the Update's own polling too, which the SDK reports as its own class.
      if (isGrpcDeadlineError(err) || err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) {
        throw new StackUnavailableError(
          `the write for agent ${agentId} was not acknowledged within ${this.config.writeTimeoutMs} ms; sending it again is safe`,
          { agentId },
        );
      }
      throw err;
    }
  }

  /**
   * One Update; sent again while the agent's run is handing over to the next, or when the
   * server aborted it before any run took it (client/resend.ts). Both take moments; the write
   * is idempotent, so a resend lands the same ids.
   */
  private async sendWrite(agentId: string, entries: WriteEntry[]): Promise<PersistedEntry[]> {
    try {
      return await resending(
        () => this.withinDeadline(agentId, () => this.sendWriteOnce(agentId, entries)),
        (reason, attempts) =>
          new StackUnavailableError(
            `the write for agent ${agentId} was turned away ${attempts} times (${reason}); sending it again is safe`,
            { agentId },
          ),
      );
    } catch (err) {
      throw asMemgateError(err);
    }
  }

  private async sendWriteOnce(agentId: string, entries: WriteEntry[]): Promise<PersistedEntry[]> {
    const workflowId = agentMemoryWorkflowId(agentId);
    // Sealed per entry: forget deletes the key, and every copy in any history is unreadable.
    const args: [SealedWrite] = [await sealWrite(this.store, agentId, entries)];
    // A plain Update costs the server less than update-with-start; use it once this client
    // has seen the agent's workflow running, and fall back if it has since closed.
    if (this.runningAgents.has(agentId)) {
      try {
        return (await this.temporal.workflow.getHandle(workflowId).executeUpdate(writeUpdate, { args }))
          .entries;
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        this.runningAgents.delete(agentId);
      }
    }
    const startWorkflowOperation = new WithStartWorkflowOperation(agentMemory, {
      workflowId,
      taskQueue: this.config.taskQueue,
      workflowIdConflictPolicy: 'USE_EXISTING',
      args: [{ agentId }],
    });
    const result = await this.temporal.workflow.executeUpdateWithStart(writeUpdate, {
      args,
      startWorkflowOperation,
    });
    this.rememberRunning(agentId);
    return result.entries;
  }

  private rememberRunning(agentId: string): void {
    if (this.runningAgents.size >= MAX_REMEMBERED_AGENTS) this.runningAgents.clear();
    this.runningAgents.add(agentId);
  }

  /**
   * Hybrid recall when the query can be embedded; lexical otherwise, and the result says why
   * (an endpoint that fails does not fail the recall: the words still find what they find).
   */
  async recall(request: RecallRequestInput): Promise<RecallResult> {
    const now = Date.now();
    const checked = parseRecallRequest(request, now);
    return typed(async () => {
      await assertAsOfKept(this.store, checked, this.policy.queryLogRetentionDays, now);
      // Not awaited here: recall reads the words while the query embeds.
      const semantic = this.semanticQuery(checked);
      return recall(this.store, checked, this.memory, semantic);
    });
  }

  /**
   * The reference passages' vectors (core/referencePassages.ts), once per client with its
   * model, kept beside the vector indexes (llm/referenceVectors.ts); a failure is not kept,
   * so the next recall tries again.
   */
  private referenceVectors(embedder: Embedder): Promise<Float32Array[]> {
    this.reference ??= referenceVectors(embedder, this.config.vectorIndexDir).catch((err: unknown) => {
      this.reference = undefined;
      throw err;
    });
    return this.reference;
  }

  /**
   * One query embedding of an agent at the endpoints at a time, the next after it: a server that
   * embeds one request at a time takes them in no order, and an agent whose recalls come many
   * at once would otherwise hold every other agent's behind them; so it holds one query server
   * at most, and with two another agent's query finds one free (docs/serving.md, Embeddings in
   * two lanes).
   */
  private embedQuery(
    embedder: Embedder,
    request: { agentId: string; query: string },
  ): Promise<Float32Array[]> {
    const { agentId } = request;
    const before = this.queryEmbeddings.get(agentId);
    // `before` never rejects: it is the previous one, settled either way.
    const mine = (before ?? Promise.resolve()).then(() =>
      embedder.embed([embeddedQueryOf(request.query)], 'query'),
    );
    const settled = mine.then(
      () => undefined,
      () => undefined,
    );
    this.queryEmbeddings.set(agentId, settled);
    void settled.then(() => {
      if (this.queryEmbeddings.get(agentId) === settled) this.queryEmbeddings.delete(agentId);
    });
    return mine;
  }

  private async semanticQuery(request: { agentId: string; query: string }): Promise<SemanticQuery> {
    if (!this.embedder) return { unavailable: (this.embeddings as { unavailable: string }).unavailable };
    const since = performance.now();
    const { model, dimensions } = this.embedder;
    // The index loads or catches up while the query embeds.
    this.vectorIndexes.prepare(request.agentId, { model, dimensions });
    try {
      const [[vector], reference] = await Promise.all([
        this.embedQuery(this.embedder, request),
        this.referenceVectors(this.embedder),
      ]);
      return {
        indexes: this.vectorIndexes,
        model: this.embedder.model,
        vector: vector!,
        reference,
        embeddingMs: performance.now() - since,
        since,
      };
    } catch (err) {
      return { unavailable: `the query could not be embedded: ${(err as Error).message}` };
    }
  }

  /** Run one agent's nightly pass as of `asOf`; joins a run of the same agent and instant already under way. */
  async consolidate(input: { agentId: string; asOf: number }): Promise<ConsolidationReport> {
    const { agentId, asOf } = parseInput(consolidateAgentInputSchema, input, 'consolidation');
    assertNotAhead(asOf, Date.now(), 'asOf', 'consolidation');
    return typed(() =>
      this.temporal.workflow.execute(consolidateAgent, {
        workflowId: consolidateAgentWorkflowId(agentId, asOf),
        taskQueue: this.config.taskQueue,
        args: [{ agentId, asOf }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }

  /** Reverse a supersession, or renew an expired volatile fact until `freshUntil`. */
  async restore(input: { agentId: string; entryId: string; freshUntil?: number }): Promise<RestoreResult> {
    const request = parseInput(restoreInputSchema, input, 'restore');
    // Refused before sending, at this clock; the activity checks again at the workflow's.
    parseInput(restoreStepSchema, { ...request, at: Date.now() }, 'restore');
    return typed(() =>
      this.temporal.workflow.execute(restore, {
        workflowId: restoreWorkflowId(request.agentId, request.entryId),
        taskQueue: this.config.taskQueue,
        args: [request],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }

  /**
   * Convert an agent's store to this client's embedding model (`memgate reembed`): resumable,
   * and a second call while one runs joins it. Workers must embed with the same model, at the
   * same dimensions.
   */
  async reembed(input: { agentId: string }): Promise<ReembedResult> {
    const agentId = parseInput(agentIdSchema, input.agentId, 'agent id');
    const request = {
      agentId,
      model: this.config.embeddingsModel,
      dimensions: this.config.embeddingsDimensions,
    };
    return typed(() =>
      this.temporal.workflow.execute(reembed, {
        workflowId: reembedWorkflowId(agentId),
        taskQueue: this.config.taskQueue,
        args: [request],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }

  /** Erase an entry (docs/invariants.md, Erasure wins); NotFoundError when the agent has no such entry. */
  async forget(input: { agentId: string; entryId: string }) {
    const request = parseInput(forgetInputSchema, input, 'forget');
    return typed(() =>
      this.temporal.workflow.execute(forget, {
        workflowId: forgetWorkflowId(request.agentId, request.entryId),
        taskQueue: this.config.taskQueue,
        args: [request],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }

  /**
   * Erase everything of an agent (docs/erasure.md), leaving each of its ids behind a
   * content-free tombstone: resumable, a call while one runs joins it, and one after it
   * finished (or for an agent with nothing stored) answers with nothing removed.
   */
  async eraseAgent(input: { agentId: string }): Promise<EraseAgentResult> {
    const request = parseInput(eraseAgentInputSchema, input, 'erase agent');
    return typed(() =>
      this.temporal.workflow.execute(eraseAgent, {
        workflowId: eraseAgentWorkflowId(request.agentId),
        taskQueue: this.config.taskQueue,
        args: [request],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }

  /**
   * Whether the store keeps its promises (store/verify.ts): every id accounted for, one copy
   * per entry, no erased content, every stand-in standing. Reads in batches; one agent or all.
   */
  async verify(request: { agentId?: string } = {}): Promise<VerifyReport> {
    const { agentId } = parseInput(verifyRequestSchema, request, 'verify');
    return typed(async () => {
      const report = await verifyStore(this.store, {
        ...(agentId !== undefined && { agentId }),
        batch: this.config.nightlyBatch,
        vectorIndexDir: this.config.vectorIndexDir,
      });
      // Temporal too: what an erasure left readable in the agents' workflow histories.
      for await (const agent of agentId !== undefined ? [agentId] : this.agentsInPages()) {
        const { findings } = await erasedInHistory(this.temporal, this.codec, this.store, agent);
        report.findings.push(...findings);
      }
      report.ok = report.findings.length === 0;
      return report;
    });
  }

  private async *agentsInPages(): AsyncGenerator<string> {
    for (let after: string | undefined; ;) {
      const page = await registeredAgents(this.store, {
        ...(after !== undefined && { after }),
        limit: this.config.nightlyBatch,
      });
      yield* page;
      if (page.length < this.config.nightlyBatch) return;
      after = page.at(-1);
    }
  }

  /**
   * Temporal's codec-server protocol (docs/erasure.md, Reading histories): payloads encoded
   * with memgate's codec (a write in clear sealed first, its agent within `scope`), or decoded.
   */
  async codecPayloads(
    direction: 'encode' | 'decode',
    payloads: WirePayload[],
    scope?: KeyScope,
  ): Promise<WirePayload[]> {
    return typed(() =>
      direction === 'encode'
        ? encodeForWire(this.codec, this.store, payloads, {
            limits: this.limits,
            inScope: (agentId) => scope && assertInScope(scope, agentId),
          })
        : // A key of some agents decodes the payload layer only: the entries stay sealed.
          decodeForWire(this.codec, this.store, payloads, { openEntries: !scope || scope.agents === '*' }),
    );
  }

  /**
   * The agent's export (docs/export.md) as chunks of JSON Lines, each read from the store only
   * when the caller asks for it (`GET /v1/agents/{agentId}/export`); NotFound for an agent
   * that has stored nothing.
   */
  async *exportAgent(input: { agentId: string }): AsyncGenerator<string, void> {
    const agentId = parseInput(agentIdSchema, input.agentId, 'agent id');
    try {
      yield* exportChunks(this.store, agentId, Date.now());
    } catch (err) {
      throw asMemgateError(err);
    }
  }

  // The memory browser's reads (docs/browser.md): each by `_id` or by equality on an indexed field.

  /** A page of the registered agents the key's scope covers (every agent without a key), in id order. */
  async agents(
    request: { after?: string; limit?: number },
    scope?: KeyScope,
  ): Promise<{ agents: { agentId: string; firstWriteAt: number }[]; next?: string }> {
    const { after, limit } = parseInput(agentsRequestSchema, request, 'agent listing');
    return typed(() =>
      agentsInScope(this.store, {
        pattern: scope?.agents ?? '*',
        ...(after !== undefined && { after }),
        limit,
      }),
    );
  }

  /** The agent's census now, and the policy its salience decays by; NotFound for an agent never written. */
  async agent(input: { agentId: string }): Promise<AgentView> {
    const agentId = parseInput(agentIdSchema, input.agentId, 'agent id');
    const overview = await typed(() => agentOverview(this.store, agentId, Date.now()));
    if (!overview) throw new NotFoundError(`no agent ${agentId}`, { agentId });
    const { halfLifeHours, gateThreshold } = this.policy;
    return { ...overview, policy: { halfLifeHours, gateThreshold } };
  }

  /** The agent's nights, newest first, each with its counts, times, census and workflow. */
  async nights(request: { agentId: string; before?: number; limit?: number }): Promise<{
    nights: (Night & { workflowId: string })[];
    next?: number;
  }> {
    const checked = parseInput(nightsRequestSchema, request, 'night listing');
    const { nights, next } = await typed(() => agentNights(this.store, checked));
    return {
      nights: nights.map((n) => ({ ...n, workflowId: consolidateAgentWorkflowId(checked.agentId, n.asOf) })),
      ...(next !== undefined && { next }),
    };
  }

  /** A page of the agent's entries, both tiers, in id order; `next` is where the following page starts. */
  async entries(request: {
    agentId: string;
    cursor?: string;
    limit?: number;
  }): Promise<{ entries: ListedEntry[]; next?: string }> {
    const { agentId, cursor, limit } = parseInput(entriesRequestSchema, request, 'entry listing');
    return typed(async () => {
      const start = cursor
        ? parseEntriesCursor(cursor)
        : { level: pageLevel(await countedEntries(this.store, agentId)), page: 0 };
      const page = await entriesPage(this.store, { agentId, cursor: start, limit });
      const now = Date.now();
      return {
        entries: page.entries.map(({ entry, tier }) => listedEntry(entry, tier, now, this.memory)),
        ...(page.next && { next: entriesCursorText(page.next) }),
      };
    });
  }

  /** An entry (or the tombstone it left) with its lifecycle and stand-ins; NotFound when the agent has none such. */
  async entry(request: { agentId: string; entryId: string }): Promise<EntryView> {
    const { agentId, entryId } = parseInput(entryRequestSchema, request, 'entry');
    const detail = await typed(() => entryDetail(this.store, agentId, entryId));
    if (!detail) throw new NotFoundError(`agent ${agentId} has no entry ${entryId}`, { agentId, entryId });
    const { stored, ...rest } = detail;
    return {
      ...rest,
      ...(stored && { entry: shownEntry(stored.entry, stored.tier, Date.now(), this.memory) }),
    };
  }

  /** The last run of `memgate audit`: its summary rows, for the decomposition chart; NotFound before any. */
  async lastAudit(): Promise<AuditRun> {
    const run = await typed(() => lastAuditRun(this.store));
    if (!run) throw new NotFoundError('no audit run is recorded: run `memgate audit`');
    return run;
  }

  /**
   * A call for a key counts toward the key's quota (store/quotas.ts): a write for an agent it
   * has not written for, a window it opens. QuotaExceeded when the key holds its quota.
   */
  async claimForKey(scope: KeyScope, kind: QuotaKind, id: string): Promise<void> {
    const max = kind === 'agent' ? this.config.keyMaxAgents : this.config.keyMaxWindows;
    const settlesIn = this.config.writeTimeoutMs;
    const claim = () =>
      typed(() => claimForKey(this.store, { keyId: scope.keyId, kind, id, max, at: Date.now(), settlesIn }));
    try {
      await claim();
    } catch (err) {
      if (!(err instanceof QuotaExceededError) || (await this.releaseUnheldPlaces(scope.keyId, kind)) === 0)
        throw err;
      await claim();
    }
  }

  /**
   * Gives back the key's places that nothing holds: claims counted for a call that then failed
   * or was refused (a write the agent's workflow refused, an open the server never took).
   * Only claims no call under way can hold are looked at (`unrenewedBefore`), and each is
   * given back only if still so. A write that lands after all has its agent claimed again by
   * the key's next write for it. Returns how many it gave back.
   */
  private async releaseUnheldPlaces(keyId: string, kind: QuotaKind): Promise<number> {
    const before = unrenewedBefore(Date.now(), this.config.writeTimeoutMs);
    const settled = await typed(() => settledClaims(this.store, keyId, kind, before));
    const held =
      kind === 'agent'
        ? await typed(() => agentsRegistered(this.store, settled))
        : await openSessions(this.temporal, settled);
    let released = 0;
    for (const id of settled.filter((s) => !held.has(s))) {
      if (await typed(() => releaseUnheld(this.store, keyId, kind, id, before))) released++;
    }
    return released;
  }

  /** A window closed (by this key, another, or none): every key that opened it gets its place back. */
  async releaseWindow(sessionId: string, closer?: KeyScope): Promise<void> {
    await typed(() => releaseWindowClaims(this.store, sessionId, closer?.keyId));
  }

  /**
   * The scope of a live API key (`Authorization: Bearer <key>` on the servers), or
   * Unauthenticated; the key itself is compared with its stored digest only.
   */
  async authenticate(key: string): Promise<KeyScope> {
    const scope = await typed(() => authenticate(this.store, key));
    if (!scope) throw new UnauthenticatedError('no live API key: create one with `memgate keys create`');
    return scope;
  }

  async close(): Promise<void> {
    await this.vectorIndexes.close();
    await this.temporal.connection.close();
    await this.store.close();
  }
}
