import { describe, expect, it } from 'vitest';
import { StackUnavailableError } from '../../core/errors';
import { useTestEnv } from '../support/env';

/**
 * A write has a deadline: with no worker taking the agent's workflow, the client gives up
 * after MEMGATE_WRITE_TIMEOUT_MS with a typed StackUnavailable instead of waiting forever.
 */
const env = useTestEnv({ MEMGATE_WRITE_TIMEOUT_MS: '1500' }, { inProcessWorker: false });

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
