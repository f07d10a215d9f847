import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, inject } from 'vitest';
import { terminateOpenWorkflows } from '../../client/admin';
import { MemgateClient, type ClientEndpoints } from '../../client/client';
import { parseConfig, type Config } from '../../core/config';
import { createMemgateWorker, type WorkerHandle } from '../../worker/worker';
import type { Store } from '../../store/db';
import type { EmbeddingsEndpoint } from '../../llm';

export interface TestEnv {
  config: Config;
  client: MemgateClient;
  store: Store;
  worker: WorkerHandle;
  endpoints: ClientEndpoints;
  /**
   * An agent id unique to this environment. Workflow ids derive from agent ids and outlive a
   * test run on the shared server, so a fixed id would reach a workflow of an earlier run.
   */
  agent(name: string): string;
  /** Restart the worker (crash tests): shuts the current one down and starts a fresh one. */
  restartWorker(): Promise<void>;
  /** Shut the worker down (until `restartWorker`), so another process's worker takes the queue. */
  stopWorker(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A real worker and client on the shared servers, isolated by a database and a task queue
 * of their own, so test files can run side by side.
 */
export async function startTestEnv(
  overrides: Record<string, string> = {},
  opts: { inProcessWorker?: boolean; embeddings?: EmbeddingsEndpoint; mongoUri?: string } = {},
): Promise<TestEnv> {
  const id = randomUUID().slice(0, 8);
  const config = parseConfig({
    MEMGATE_DB: `test_${id}`,
    MEMGATE_TASK_QUEUE: `test-${id}`,
    // A test's agent has a handful of vectors, which load at once; on a busy machine "at once"
    // can take seconds, and a recall that gave up waiting would be lexical, not what it tests.
    MEMGATE_RECALL_INDEX_WAIT_MS: '60000',
    // The environment's processes persist their vector indexes apart from every other's.
    MEMGATE_VECTOR_INDEX_DIR: join(tmpdir(), `memgate-test-${id}`, 'vector-indexes'),
    ...overrides,
  });
  const endpoints: ClientEndpoints = {
    temporalAddress: inject('temporalAddress'),
    mongoUri: opts.mongoUri ?? inject('mongoUri'),
    embeddings: opts.embeddings ?? {
      queryUrls: inject('embeddingsQueryUrls'),
      passagesUrl: inject('embeddingsPassagesUrl'),
    },
  };
  const bundle = { codePath: inject('workflowBundlePath') };
  // Without one (process-kill tests), the test runs `memgate worker` processes itself.
  const inProcess = opts.inProcessWorker ?? true;
  // As `memgate start` does: the client first, and the worker searches its vector indexes.
  const client = await MemgateClient.connect(config, endpoints);
  const workerOptions = { workflowBundle: bundle, vectorIndexes: client.vectorIndexes };
  let worker = inProcess ? await createMemgateWorker(config, endpoints, workerOptions) : undefined;
  let running = worker?.run();
  const env: TestEnv = {
    config,
    client,
    store: client.store,
    endpoints,
    agent: (name) => `${name}-${id}`,
    get worker() {
      if (!worker) throw new Error('this environment has no in-process worker');
      return worker;
    },
    async restartWorker() {
      await env.stopWorker();
      worker = await createMemgateWorker(config, endpoints, workerOptions);
      running = worker.run();
    },
    async stopWorker() {
      worker?.worker.shutdown();
      await running;
      worker = undefined;
      running = undefined;
    },
    async close() {
      await terminateOpenWorkflows(client.temporal, config.taskQueue, 'test environment closed');
      worker?.worker.shutdown();
      await running;
      await client.store.db.dropDatabase();
      await client.close();
      rmSync(dirname(config.vectorIndexDir), { recursive: true, force: true });
    },
  };
  return env;
}

/**
 * The environment of one test file: started before its first test and closed after its last,
 * as most files want it. What it returns reads through to the started environment, so a test
 * writes `env.client` as it would with its own `beforeAll`; read before the start, it throws.
 */
export function useTestEnv(...args: Parameters<typeof startTestEnv>): TestEnv {
  let env: TestEnv | undefined;
  beforeAll(async () => {
    env = await startTestEnv(...args);
  });
  afterAll(async () => {
    await env?.close();
  });
  return new Proxy({} as TestEnv, {
    get(_, property) {
      if (!env) throw new Error('the test environment is read before beforeAll started it');
      return Reflect.get(env, property, env) as unknown;
    },
  });
}
