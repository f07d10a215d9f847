import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StackUnavailableError } from '../../core/errors';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * A write has a deadline: with no worker taking the agent's workflow, the client gives up
 * after MEMGATE_WRITE_TIMEOUT_MS with a typed StackUnavailable instead of waiting forever.
 */
let env: TestEnv;

beforeAll(async () => {
  env = await startTestEnv({ MEMGATE_WRITE_TIMEOUT_MS: '1500' }, { inProcessWorker: false });
});
afterAll(async () => {
  await env?.close();
});

describe('the write deadline', () => {
  it('no worker: the write fails typed, saying a resend is safe', async () => {
    const agentId = env.agent('no-worker');
    const write = env.client.write({
      agentId,
      entries: [{ text: 'Nobody takes this write.', idempotencyKey: 'k1' }],
    });
    await expect(write).rejects.toBeInstanceOf(StackUnavailableError);
    await expect(write).rejects.toThrow(/sending it again is safe/);
  }, 60_000);
});
