import type { Config } from '../core/config';
import { createModels, type EmbeddingsEndpoint } from '../llm';
import { createEmbedActivities } from './embed';
import type { Store } from '../store/db';
import type { VectorIndexes } from '../store/vectorIndexes';
import { createAuditActivities } from '../audit/activities';
import { withTypedFailures } from './failures';
import { createEraseAgentActivities } from './eraseAgent';
import { createForgetActivities } from './forget';
import { inBackground } from './background';
import { withLiveness } from './liveness';
import { createNightlyActivities } from './nightly';
import { createPolicyActivities } from './policy';
import { createRestoreActivities } from './restore';
import { createWriteActivities } from './write';

export interface ActivityDeps {
  store: Store;
  config: Config;
  embeddings: EmbeddingsEndpoint;
  /**
   * The process's nearest-neighbour indexes (store/vectorIndexes.ts), which the night searches
   * when it clusters by meaning: with embeddings, the one set the process's recall uses too.
   */
  vectorIndexes: VectorIndexes | undefined;
}

/** Every activity of the production worker, each wrapped once. */
export function createActivities(deps: ActivityDeps) {
  // The local models, or the OpenAI-compatible ones when OPENAI_BASE_URL is set.
  const models = createModels(deps.config);
  const { embedEntries, embedPhase, markForReembedding, reembedAwaiting } = inBackground(
    withLiveness(createEmbedActivities(deps.store, deps.config, deps.embeddings)),
  );
  return withTypedFailures({
    ...createPolicyActivities(deps.store),
    ...createWriteActivities(deps.store),
    ...inBackground(
      withLiveness(createNightlyActivities(deps.store, deps.config, models.summariser, deps.vectorIndexes)),
    ),
    ...withLiveness(createForgetActivities(deps.store, models.summariser)),
    ...withLiveness(createRestoreActivities(deps.store)),
    ...inBackground(withLiveness(createEraseAgentActivities(deps.store, deps.config))),
    embedEntries,
    embedPhase,
    markForReembedding,
    reembedAwaiting,
  });
}

// What each workflow may call: its own activities, and the stored policy it reads once.
type PolicyActivities = ReturnType<typeof createPolicyActivities>;
type EmbedActivities = ReturnType<typeof createEmbedActivities>;
export type WriteActivities = ReturnType<typeof createWriteActivities> &
  PolicyActivities &
  Pick<EmbedActivities, 'embedEntries'>;
export type NightlyActivities = ReturnType<typeof createNightlyActivities> &
  PolicyActivities &
  Pick<EmbedActivities, 'embedPhase'>;
export type ReembedActivities = Pick<EmbedActivities, 'markForReembedding' | 'reembedAwaiting'>;
export type ForgetActivities = ReturnType<typeof createForgetActivities> & PolicyActivities;
export type RestoreActivities = ReturnType<typeof createRestoreActivities>;
export type EraseAgentActivities = ReturnType<typeof createEraseAgentActivities>;

/**
 * The audit's, for its own worker on its own task queue: production workers never load them.
 * The hybrid ranker caches its vectors in `embeddingCacheDir` (llm/embeddingCache.ts).
 */
export function createAuditWorkerActivities(deps: ActivityDeps, embeddingCacheDir: string) {
  return withTypedFailures(
    createAuditActivities(
      deps.store,
      deps.config,
      createModels(deps.config),
      deps.embeddings,
      embeddingCacheDir,
    ),
  );
}

export type AuditActivities = ReturnType<typeof createAuditWorkerActivities>;
