import { describe, expect, it } from 'vitest';
import { MemgateClient } from '../../client/client';
import { StackUnavailableError } from '../../core/errors';
import { useTestEnv } from '../support/env';

/**
 * Every failure a MemgateClient call meets reaches its caller as a MemgateError with a
 * `type`, never as a raw driver or gRPC error: a server that is gone, a connection closed
 * under the call.
 */
const env = useTestEnv();

describe('a MemgateClient whose servers fail', () => {
  it('cannot reach Temporal: StackUnavailable naming the address', async () => {
    const failure = await MemgateClient.connect(env.config, {
      ...env.endpoints,
      temporalAddress: '127.0.0.1:1',
    }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(StackUnavailableError);
    expect((failure as Error).message).toContain('127.0.0.1:1');
  }, 60_000);

  it('loses its store connection: recall, verify and write fail typed', async () => {
    const client = await MemgateClient.connect(env.config, env.endpoints);
    const agentId = env.agent('closed');
    await client.write({ agentId, entries: [{ text: 'The spare key is under the blue pot.' }] });
    await client.store.close();
    await expect(client.recall({ agentId, query: 'spare key' })).rejects.toBeInstanceOf(
      StackUnavailableError,
    );
    await expect(client.verify({ agentId })).rejects.toBeInstanceOf(StackUnavailableError);
    await client.temporal.connection.close();
    await expect(
      client.write({ agentId, entries: [{ text: 'The bike lock code is 4417.' }] }),
    ).rejects.toBeInstanceOf(StackUnavailableError);
    await expect(client.consolidate({ agentId, asOf: Date.now() })).rejects.toBeInstanceOf(
      StackUnavailableError,
    );
  }, 60_000);
});
