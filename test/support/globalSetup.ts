import { rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { parseConfig } from '../../core/config';
import { StackUnavailableError } from '../../core/errors';
import { resolveEmbeddings } from '../../stack/connection';
import type { PostgresPaths } from '../../stack/postgres';
import { embeddingsUp, postgresPaths, stackDown, stackUp } from '../../stack/stack';
import { writeWorkflowBundle } from './workflowBundle';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    mongoUri: string;
    /** The local stack's query servers, or MEMGATE_EMBEDDINGS_URL's; none is an error here. */
    embeddingsQueryUrls: string[];
    embeddingsPassagesUrl: string;
    workflowBundlePath: string;
    /** The local stack's PostgreSQL under FerretDB; null when the tests use configured servers. */
    postgres: (PostgresPaths & { port: number }) | null;
  }
}

/**
 * Integration tests run against real servers: the ones named by TEMPORAL_ADDRESS and
 * MONGODB_URI, or else the local stack, started here (and stopped after if started here).
 * The workflow code is bundled once for every test file.
 */
export default async function setup(project: TestProject) {
  const config = parseConfig(process.env);
  const started: string[] = [];
  const stop = async () => {
    if (started.length && !process.env.MEMGATE_KEEP_STACK) await stackDown(config, started);
  };
  let temporalAddress = config.temporalAddress;
  let mongoUri = config.mongoUri;
  let workflowBundlePath: string;
  let embeddings: Awaited<ReturnType<typeof resolveEmbeddings>>;
  // Whatever this started is stopped if setup then fails: vitest calls the teardown returned
  // below only once setup has returned.
  try {
    if (!temporalAddress || !mongoUri) {
      const stack = await stackUp(config, (line) => console.log(`[stack] ${line}`));
      started.push(...stack.started);
      temporalAddress ??= stack.temporalAddress;
      mongoUri ??= stack.mongoUri;
    }
    // Semantic recall is under test: the local embeddings server serves configured servers too,
    // and a run without any endpoint fails here, with why, rather than pass with recall lexical.
    if (!config.embeddingsUrls && config.temporalAddress && config.mongoUri) {
      started.push(...(await embeddingsUp(config, (line) => console.log(`[stack] ${line}`))));
    }
    embeddings = await resolveEmbeddings(
      { ...config, temporalAddress: undefined, mongoUri: undefined },
      config,
    );
    if (!('queryUrls' in embeddings))
      throw new StackUnavailableError(`no embeddings endpoint for the tests: ${embeddings.unavailable}`);
    workflowBundlePath = await writeWorkflowBundle(config.stateDir, 'workflow-bundle');
  } catch (err) {
    await stop();
    throw err;
  }
  project.provide('temporalAddress', temporalAddress);
  project.provide('mongoUri', mongoUri);
  project.provide('embeddingsQueryUrls', embeddings.queryUrls);
  project.provide('embeddingsPassagesUrl', embeddings.passagesUrl);
  project.provide('workflowBundlePath', workflowBundlePath);
  project.provide(
    'postgres',
    config.mongoUri ? null : { ...postgresPaths(config), port: config.postgresPort },
  );
  return async () => {
    rmSync(workflowBundlePath, { force: true });
    await stop();
  };
}
