import type { Config } from '../core/config';
import { log } from '@temporalio/activity';
import { InvalidConfigError, ModelError } from '../core/errors';
import {
  embedEntriesInputSchema,
  parseInput,
  phaseInputSchema,
  reembedInputSchema,
  type ReembedInput,
  type EmbedOutcome,
} from '../core/messages';
import { agentIdSchema } from '../core/entry';
import { createEmbedder, type EmbeddingsEndpoint } from '../llm';
import { EMBED_BATCH, type Embedder } from '../llm/embedder';
import type { Store } from '../store/db';
import {
  awaitingEmbedding,
  entriesToEmbed,
  markForEmbedding,
  settleEmbedded,
  storeVectors,
} from '../store/vectors';
import { heartbeat } from './liveness';

/**
 * Whether the endpoint refused a text rather than failed: an unusable vector for it, or an
 * answer that faults the request's content (400, 413, 422: too long for the model, say).
 */
function refusedText(err: unknown): err is ModelError {
  if (!(err instanceof ModelError)) return false;
  const { defect, status } = err.details as { defect?: unknown; status?: unknown };
  return defect !== undefined || status === 400 || status === 413 || status === 422;
}

/**
 * The texts' vectors. When the endpoint refuses a text of them, each is embedded alone, and
 * one refused alone is answered with its refusal; when every one is, the endpoint is at
 * fault, not the texts, and the first failure is thrown as it is.
 */
async function vectorsOrRefusals(
  e: Embedder,
  texts: readonly string[],
): Promise<(Float32Array | ModelError)[]> {
  try {
    return await e.embed(texts, 'passage');
  } catch (err) {
    if (texts.length === 1 || !refusedText(err)) throw err;
    const alone: (Float32Array | ModelError)[] = [];
    for (const text of texts) {
      alone.push(
        await e.embed([text], 'passage').then(
          ([vector]) => vector!,
          (why: unknown) => {
            if (!refusedText(why)) throw why;
            return why;
          },
        ),
      );
    }
    if (alone.every((v) => v instanceof ModelError)) throw err;
    return alone;
  }
}

/**
 * Vectors off the write path (dual-phase): a write is acknowledged without them; the agent's
 * workflow embeds its new entries soon after, the night embeds whatever is left (and every
 * summary it writes), and `memgate reembed` converts a store to a new model. A worker with no
 * embeddings endpoint embeds nothing and says why; the entries keep their `embed` work.
 */
export function createEmbedActivities(store: Store, config: Config, endpoint: EmbeddingsEndpoint) {
  const embedder = 'queryUrls' in endpoint ? createEmbedder(config, endpoint) : undefined;

  /**
   * Embed and store the vectors of these ids (a request's worth) that need one, then settle
   * their work. A text the endpoint refuses alone (refusedText) keeps its `embed` work and is logged by id: the
   * others of its request are embedded one by one and kept, so that one text never holds back
   * the agent's every later entry, night after night.
   */
  async function embedRequest(e: Embedder, agentId: string, ids: readonly string[]): Promise<number> {
    const { toEmbed, current } = await entriesToEmbed(store, agentId, ids, e);
    const vectors = toEmbed.length
      ? await vectorsOrRefusals(
          e,
          toEmbed.map((t) => t.text),
        )
      : [];
    vectors.forEach((v, i) => {
      if (v instanceof ModelError) {
        log.warn('the embeddings endpoint refused an entry; it awaits its vector', {
          agentId,
          entryId: toEmbed[i]!.id,
          error: v.message,
        });
      }
    });
    const kept = await storeVectors(
      store,
      agentId,
      e,
      toEmbed.flatMap((t, i) => {
        const vector = vectors[i]!;
        return vector instanceof ModelError ? [] : [{ ...t, vector }];
      }),
      Date.now(),
    );
    await settleEmbedded(store, agentId, [...current, ...kept], e.model);
    return kept.length;
  }

  /**
   * These ids, a request's worth at a time, read, embedded and stored before the next is read:
   * the lanes of many agents wake together after a burst, and each reading its whole batch at
   * once held the store from the writes that came next; and each request's vectors are kept
   * as soon as they come back, so a failure loses one request's work.
   */
  async function embedIds(e: Embedder, agentId: string, ids: readonly string[]): Promise<number> {
    let embedded = 0;
    for (let i = 0; i < ids.length; i += EMBED_BATCH) {
      heartbeat({ embedded });
      embedded += await embedRequest(e, agentId, ids.slice(i, i + EMBED_BATCH));
    }
    return embedded;
  }

  /** Every entry of the agent still awaiting its vector, a page at a time. */
  async function embedAwaiting(e: Embedder, agentId: string, batch: number): Promise<number> {
    let embedded = 0;
    for await (const page of awaitingEmbedding(store, agentId, batch)) {
      embedded += await embedIds(
        e,
        agentId,
        page.map((p) => p._id),
      );
    }
    return embedded;
  }

  const unavailable = (): EmbedOutcome => ({
    unavailable: (endpoint as { unavailable: string }).unavailable,
  });

  return {
    /** The agent's workflow, after a write: vectors for the entries it created. */
    async embedEntries(input: { agentId: string; ids: string[] }): Promise<EmbedOutcome> {
      input = parseInput(embedEntriesInputSchema, input, 'embedding');
      if (!embedder) return unavailable();
      return { embedded: await embedIds(embedder, input.agentId, input.ids) };
    },

    /** The nightly `embed` phase: entries the agent's workflow missed, and tonight's summaries. */
    async embedPhase(input: {
      agentId: string;
      asOf: number;
      runId: string;
      policy: unknown;
    }): Promise<EmbedOutcome> {
      const run = parseInput(phaseInputSchema, input, 'embed phase');
      if (!embedder) return unavailable();
      return { embedded: await embedAwaiting(embedder, run.agentId, config.nightlyBatch) };
    },

    /** `memgate reembed`, first step: every entry of the agent awaits its vector again. */
    async markForReembedding(agentId: string): Promise<number> {
      agentId = parseInput(agentIdSchema, agentId, 'agent id');
      return markForEmbedding(store, agentId, config.nightlyBatch, () => heartbeat());
    },

    /** `memgate reembed`, second step: embed them, with the model the caller asked for. */
    async reembedAwaiting(input: ReembedInput): Promise<number> {
      input = parseInput(reembedInputSchema, input, 'reembed');
      if (!embedder) {
        throw new InvalidConfigError(
          'MEMGATE_EMBEDDINGS_URL',
          `an embeddings endpoint on the worker, required by reembed (${(endpoint as { unavailable: string }).unavailable})`,
          undefined,
        );
      }
      // The model travels with the work: a worker embedding with another model must not
      // convert the store to it.
      if (embedder.model !== input.model) {
        throw new InvalidConfigError(
          'MEMGATE_EMBEDDINGS_MODEL',
          `the model reembed asked for (${input.model}); this worker embeds with ${embedder.model}`,
          embedder.model,
        );
      }
      // So do the dimensions: a space is both (core/vectorDefects.ts, EmbeddingSpace).
      if (input.dimensions !== undefined && embedder.dimensions !== input.dimensions) {
        throw new InvalidConfigError(
          'MEMGATE_EMBEDDINGS_DIMENSIONS',
          `the dimensions reembed asked for (${input.dimensions}); this worker embeds at ${embedder.dimensions}`,
          embedder.dimensions,
        );
      }
      return embedAwaiting(embedder, input.agentId, config.nightlyBatch);
    },
  };
}
