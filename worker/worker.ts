import { extname, join } from 'node:path';
import { DefaultLogger, NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { temporalConnectionOptions } from '../stack/connection';
import { embeddingCacheDir } from '../stack/stack';
import { createActivities, createAuditWorkerActivities } from '../activities';
import { ContentCodec } from '../codec/payloadCodec';
import { auditTaskQueue } from '../audit/workflow';
import { CONFIG_SPECS, type Config } from '../core/config';
import { policyDrift, policyOf } from '../core/policy';
import { adoptPolicy } from '../store/policy';
import { ensureIndexes, openStore, type Store } from '../store/db';
import { onStoreTimeout, storeLimitsOf } from '../store/guard';
import type { EmbeddingsEndpoint } from '../llm';
import { vectorIndexLimitsOf, VectorIndexes } from '../store/vectorIndexes';

export interface WorkerHandle {
  worker: Worker;
  store: Store;
  /** Resolves when the worker has shut down and its connections are closed. */
  run(): Promise<void>;
}

export interface Endpoints {
  temporalAddress: string;
  mongoUri: string;
  embeddings: EmbeddingsEndpoint;
}

/**
 * The worker process: workflows from `workflows/`, activities over one store connection.
 * `workflowBundle` lets tests bundle the workflow code once and share it.
 */
let runtimeInstalled = false;

/** The Temporal runtime is per process and can be installed once. */
export function installRuntime(config: Config): void {
  if (runtimeInstalled) return;
  Runtime.install({
    logger: new DefaultLogger(config.logLevel),
    telemetryOptions: {
      // The SDK core's own log lines go through the same logger, to stderr: by default it
      // prints them to stdout, which is the commands' (and the benchmarks') output.
      logging: { forward: {} },
      // One Prometheus endpoint per process: the SDK's worker metrics and memgate's own, which
      // activities, workflows and the HTTP API record through the same meter.
      ...(config.metricsPort !== undefined && {
        metrics: {
          prometheus: { bindAddress: `${config.httpHost}:${config.metricsPort}`, countersTotalSuffix: true },
        },
      }),
    },
  });
  runtimeInstalled = true;
  // Every store call of this process that timed out, by operation (`entries_hot.updateOne`):
  // a bounded set of names, never an agent's.
  const timeouts = Runtime.instance().metricMeter.createCounter(
    'memgate_store_timeouts',
    'calls',
    'store calls that got no answer within MEMGATE_STORE_TIMEOUT_MS, by operation',
  );
  onStoreTimeout((operation) => timeouts.add(1, { operation }));
}

export async function createMemgateWorker(
  config: Config,
  endpoints: Endpoints,
  opts: Pick<WorkerOptions, 'workflowBundle' | 'interceptors'> & {
    /**
     * The process's nearest-neighbour indexes, when it also serves recall (`memgate start`: the
     * client's): one set per process, so an agent both search is held once. Without it, the
     * worker keeps its own set, closed when the worker stops.
     */
    vectorIndexes?: VectorIndexes;
  } = {},
): Promise<WorkerHandle> {
  return startWorker(config, endpoints, {
    taskQueue: config.taskQueue,
    ...(opts.interceptors && { interceptors: opts.interceptors }),
    // Run from dist/, the bundler takes the compiled dist/workflows/index.js; under tsx, the .ts.
    workflows: opts.workflowBundle
      ? { workflowBundle: opts.workflowBundle }
      : { workflowsPath: require.resolve('../workflows') },
    activities: (store) => {
      const own =
        opts.vectorIndexes === undefined && 'queryUrls' in endpoints.embeddings
          ? new VectorIndexes(store, vectorIndexLimitsOf(config))
          : undefined;
      const vectorIndexes = opts.vectorIndexes ?? own;
      return {
        activities: createActivities({ store, config, embeddings: endpoints.embeddings, vectorIndexes }),
        close: async () => await own?.close(),
      };
    },
  });
}

/** The worker `memgate audit` brings along: the audit's workflow and activities on their own queue. */
export async function createAuditWorker(config: Config, endpoints: Endpoints): Promise<WorkerHandle> {
  return startWorker(config, endpoints, {
    taskQueue: auditTaskQueue(config.taskQueue),
    // A file path, not a module name: the test runner's `require` does not resolve `.ts`. The
    // file beside this one's kind: dist/'s compiled .js, or the .ts sources under tsx and vitest.
    workflows: { workflowsPath: join(__dirname, '..', 'audit', `workflow${extname(__filename)}`) },
    activities: (store) => ({
      activities: createAuditWorkerActivities(
        { store, config, embeddings: endpoints.embeddings, vectorIndexes: undefined },
        embeddingCacheDir(config),
      ),
    }),
  });
}

/**
 * Worker Versioning (docs/versioning.md): every worker of a build, the audit's too, is one
 * version of the deployment named by the production task queue. A run stays on the version it
 * started on (pinned), so a short workflow finishes on its own code; the forever-running ones
 * move to the current version at their next hand-over (workflows/support.ts, handOverToCurrentVersion).
 */
export function workerDeploymentOf(
  config: Pick<Config, 'taskQueue'>,
  buildId: string,
): NonNullable<WorkerOptions['workerDeploymentOptions']> {
  return {
    useWorkerVersioning: true,
    version: { deploymentName: config.taskQueue, buildId },
    defaultVersioningBehavior: 'PINNED',
  };
}

async function startWorker(
  config: Config,
  endpoints: Endpoints,
  what: {
    taskQueue: string;
    workflows: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'>;
    /** Over the worker's store; `close`, once the worker has stopped, releases what they hold. */
    activities: (store: Store) => { activities: object; close?: () => Promise<void> };
    /** The history recorder's (scripts/record-histories.ts), which fails chosen attempts. */
    interceptors?: WorkerOptions['interceptors'];
  },
): Promise<WorkerHandle> {
  installRuntime(config);
  const store = await openStore(endpoints.mongoUri, config.database, storeLimitsOf(config));
  await ensureIndexes(store);
  // The store's policy decides, not this environment's (docs/invariants.md, One policy); say
  // where they differ.
  const proposed = policyOf(config);
  const drift = policyDrift(await adoptPolicy(store, proposed), proposed);
  if (drift.length > 0) {
    Runtime.instance().logger.warn(
      `this environment's ${drift.map((f) => CONFIG_SPECS[f].env).join(', ')} differ from the stored policy, which governs; \`memgate policy\` shows it, \`memgate policy apply\` replaces it`,
      { drift },
    );
  }
  const connection = await NativeConnection.connect(
    temporalConnectionOptions(config, endpoints.temporalAddress),
  );
  const { activities, close } = what.activities(store);
  const worker = await Worker.create({
    connection,
    namespace: config.temporalNamespace,
    taskQueue: what.taskQueue,
    ...what.workflows,
    activities,
    ...(what.interceptors && { interceptors: what.interceptors }),
    ...(config.workerBuildId && {
      workerDeploymentOptions: workerDeploymentOf(config, config.workerBuildId),
    }),
    dataConverter: { payloadCodecs: [new ContentCodec(store)] },
  });
  return {
    worker,
    store,
    async run() {
      try {
        await worker.run();
      } finally {
        // Saves the indexes' unsaved changes while the store is still open.
        await close?.();
        await connection.close();
        await store.close();
      }
    },
  };
}
