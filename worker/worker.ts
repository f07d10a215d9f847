import { DefaultLogger, NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities';
import type { Config } from '../core/config';
import { memoryPolicy } from '../core/entry';
import { ensureIndexes, openStore, type Store } from '../store/db';

export interface WorkerHandle {
  worker: Worker;
  store: Store;
  /** Resolves when the worker has shut down and its connections are closed. */
  run(): Promise<void>;
}

export interface Endpoints {
  temporalAddress: string;
  mongoUri: string;
}

/**
 * The worker process: workflows from `workflows/`, activities over one store connection.
 * `workflowBundle` lets tests bundle the workflow code once and share it.
 */
let runtimeInstalled = false;

/** The Temporal runtime is per process and can be installed once. */
function installRuntime(config: Config): void {
  if (runtimeInstalled) return;
  Runtime.install({ logger: new DefaultLogger(config.logLevel) });
  runtimeInstalled = true;
}

export async function createMemgateWorker(
  config: Config,
  endpoints: Endpoints,
  opts: { workflowBundle?: WorkerOptions['workflowBundle'] } = {},
): Promise<WorkerHandle> {
  installRuntime(config);
  const store = await openStore(endpoints.mongoUri, config.database);
  await ensureIndexes(store);
  const connection = await NativeConnection.connect({ address: endpoints.temporalAddress });
  const worker = await Worker.create({
    connection,
    namespace: config.temporalNamespace,
    taskQueue: config.taskQueue,
    ...(opts.workflowBundle
      ? { workflowBundle: opts.workflowBundle }
      : { workflowsPath: require.resolve('../workflows') }),
    activities: createActivities({ store, policy: memoryPolicy(config), config }),
  });
  return {
    worker,
    store,
    async run() {
      try {
        await worker.run();
      } finally {
        await connection.close();
        await store.close();
      }
    },
  };
}
