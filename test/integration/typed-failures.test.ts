import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelError } from '../../core/errors';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { forgetWorkflowId } from '../../workflows/forget';
import { startChatModel, type ChatModel } from '../support/chatModel';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * A failure the error table calls non-retryable is attempted once: a summariser endpoint that
 * refuses the request (HTTP 400) fails the activity that called it on its first attempt,
 * instead of being retried as if the server had blinked. The endpoint is a local HTTP server
 * speaking the chat-completions protocol, reached through the worker's real OpenAI client.
 */
const T0 = Date.UTC(2025, 10, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

let model: ChatModel;
let refuse = false;
const requests: string[] = [];
let env: TestEnv;

beforeAll(async () => {
  model = await startChatModel(({ body, lastMessage }) => {
    requests.push(body);
    if (refuse) return { refuse: 'this request is not allowed' };
    // The sources' own first line as the summary: lossless, so the night links the sources.
    return /\[1\] ([^\n]*)/.exec(lastMessage)![1]!;
  });
  env = await startTestEnv({ OPENAI_BASE_URL: model.url, OPENAI_API_KEY: 'test-key' });
});
afterAll(async () => {
  await env?.close();
  await model?.close();
});

describe('typed failures', () => {
  it('a summariser that refuses (HTTP 400) fails forget on its first attempt, with ModelError', async () => {
    const agentId = env.agent('refusing-summariser');
    const { entries } = await env.client.write({
      agentId,
      entries: [9, 10, 11].map((hour) => ({
        text: `Visitors sign in at the north reception desk${hour === 10 ? '. The lab door code is 4471.' : '.'}`,
        salience: 0.8,
        writtenAt: dayAt(0, hour),
      })),
    });
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    expect(await env.store.hot.countDocuments({ agentId, kind: 'summary' })).toBe(1);

    // Erasing a source rebuilds the summary from the others: the summariser is asked, and refuses.
    refuse = true;
    const before = requests.length;
    const secret = entries[1]!.id;
    await expect(env.client.forget({ agentId, entryId: secret })).rejects.toBeInstanceOf(ModelError);
    expect(requests.length - before).toBe(1);
    const history = await env.client.temporal.workflow
      .getHandle(forgetWorkflowId(agentId, secret))
      .fetchHistory();
    const scheduled = new Map<number, string>();
    const attempts: [string, number][] = [];
    for (const e of history.events!) {
      const s = e.activityTaskScheduledEventAttributes;
      if (s) scheduled.set(Number(e.eventId), s.activityType!.name!);
      const started = e.activityTaskStartedEventAttributes;
      if (started) attempts.push([scheduled.get(Number(started.scheduledEventId))!, started.attempt!]);
    }
    // Each step once, and forgetDerived, whose summariser refused, not retried.
    expect(attempts).toEqual([
      ['forgetTombstone', 1],
      ['currentPolicy', 1],
      ['forgetEntry', 1],
      ['forgetDerived', 1],
    ]);
  }, 300_000);
});
