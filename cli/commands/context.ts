import { parseConfig, type Config } from '../../core/config';
import { endpoints as localEndpoints, stackStatus } from '../../stack/stack';
import { MemgateClient, type ClientEndpoints } from '../../client/client';
import { resolveEmbeddings } from '../../stack/connection';
import { StackUnavailableError } from '../../core/errors';

/** Configuration, read from the environment once per CLI invocation. */
let cached: Config | undefined;
export function config(): Config {
  cached ??= parseConfig(process.env);
  return cached;
}

/** The servers to talk to: the configured ones, else the local stack, which must be up. */
export async function resolveEndpoints(): Promise<ClientEndpoints> {
  const c = config();
  const embeddings = await resolveEmbeddings(c, c);
  if (c.temporalAddress && c.mongoUri) {
    return { temporalAddress: c.temporalAddress, mongoUri: c.mongoUri, embeddings };
  }
  const status = await stackStatus(c);
  if ((!c.temporalAddress && !status.temporal) || (!c.mongoUri && !status.mongo)) {
    throw new StackUnavailableError(
      'the local stack is not running: start it with `memgate stack up` or `npm start`',
    );
  }
  const local = localEndpoints(c);
  return {
    temporalAddress: c.temporalAddress ?? local.temporalAddress,
    mongoUri: c.mongoUri ?? local.mongoUri,
    embeddings,
  };
}

export async function withClient<T>(
  fn: (client: MemgateClient) => Promise<T>,
  overrides: Partial<Config> = {},
): Promise<T> {
  const client = await MemgateClient.connect({ ...config(), ...overrides }, await resolveEndpoints());
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

export function printJson(value: unknown): void {
  console.log(JSON.stringify(value, null, 2));
}
