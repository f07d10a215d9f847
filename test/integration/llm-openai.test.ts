import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ModelError } from '../../core/errors';
import { chooseJudge, chooseReader, createModels } from '../../llm';
import { evidenceReader, normalisedMatchJudge } from '../../llm/local';
import { DONT_KNOW, type ReaderInput } from '../../llm/models';
import { extractiveSummariser } from '../../llm/summariser';
import {
  openAIImportanceScorer,
  openAIJudge,
  openAIModel,
  openAIReader,
  openAISummariser,
  type OpenAISettings,
} from '../../llm/openai';

/**
 * A local HTTP server that speaks the chat-completions protocol, driven through the real
 * `openai` client: each test queues how the server answers the next requests.
 */
type Responder = (body: ChatRequest, res: ServerResponse) => void;
interface ChatRequest {
  model: string;
  messages: { role: string; content: string }[];
  response_format?: { type: string; json_schema?: { name: string; strict?: boolean; schema: unknown } };
}

let server: Server;
let settings: OpenAISettings;
const requests: { path: string; auth: string | undefined; body: ChatRequest }[] = [];
const responders: Responder[] = [];
const pendingTimers = new Set<NodeJS.Timeout>();

function completion(content: string) {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'test-model',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

const json =
  (status: number, payload: unknown): Responder =>
  (_body, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(payload));
  };
const answer = (content: unknown) => json(200, completion(JSON.stringify(content)));

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw) as ChatRequest;
      requests.push({ path: req.url ?? '', auth: req.headers.authorization, body });
      const respond = responders.shift() ?? json(500, { error: { message: 'no responder queued' } });
      respond(body, res);
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  settings = {
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: 'test-key',
    model: 'test-model',
    timeoutMs: 5_000,
  };
});

afterAll(async () => {
  for (const t of pendingTimers) clearTimeout(t);
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
});

beforeEach(() => {
  requests.length = 0;
  responders.length = 0;
});

const readerInput: ReaderInput = {
  question: 'Where do I keep my shoes?',
  questionDate: '2023/06/23 (Fri) 07:31',
  snippets: [
    { id: 'g1', text: 'I put a shoe rack in my closet.', date: '2023/05/01 (Mon) 10:00', role: 'user' },
  ],
  reference: { answer: 'SECRET-REFERENCE', evidenceIds: ['g1'] },
};

describe('OpenAI-compatible adapters over real HTTP', () => {
  it('the reader asks for structured JSON, sends the snippets but never the reference', async () => {
    responders.push(answer({ answer: ' in a shoe rack in my closet ' }));
    const reader = openAIReader(openAIModel(settings));
    expect(await reader.answer(readerInput)).toBe('in a shoe rack in my closet');
    expect(requests).toHaveLength(1);
    const { path, auth, body } = requests[0]!;
    expect(path).toBe('/v1/chat/completions');
    expect(auth).toBe('Bearer test-key');
    expect(body.model).toBe('test-model');
    expect(body.response_format).toMatchObject({
      type: 'json_schema',
      json_schema: {
        name: 'reader',
        strict: true,
        schema: { required: ['answer'], additionalProperties: false },
      },
    });
    const prompt = JSON.stringify(body.messages);
    expect(prompt).toContain('I put a shoe rack in my closet.');
    expect(prompt).toContain(`exactly \\"${DONT_KNOW}\\"`);
    expect(prompt).not.toContain('SECRET-REFERENCE');
  });

  it('the judge returns the verdict and is told dates and numbers must match in value', async () => {
    responders.push(answer({ correct: false, reason: '14 is not 30' }));
    const judge = openAIJudge(openAIModel(settings));
    expect(
      await judge.correct({ question: 'Notice period?', reference: '30 days', response: '14 days' }),
    ).toBe(false);
    const system = requests[0]!.body.messages[0]!.content;
    expect(system).toMatch(/dates and numbers must match in value/i);
  });

  it('the importance scorer batches units and maps scores back in order, without a question', async () => {
    const units = Array.from({ length: 30 }, (_, i) => ({
      id: `u${i}`,
      text: `memory ${i}`,
      role: 'user' as const,
    }));
    responders.push(
      answer({ scores: Array.from({ length: 25 }, (_, i) => ({ id: String(i + 1), score: (i % 10) + 1 })) }),
    );
    responders.push(
      answer({ scores: Array.from({ length: 5 }, (_, i) => ({ id: String(5 - i), score: 10 - i })) }),
    );
    const scores = await openAIImportanceScorer(openAIModel(settings)).score(units);
    expect(scores).toHaveLength(30);
    expect(scores.slice(0, 3)).toEqual([1, 2, 3]);
    expect(scores.slice(25)).toEqual([6, 7, 8, 9, 10]);
    expect(requests).toHaveLength(2);
    // The model sees the units and nothing else.
    expect(requests[0]!.body.messages[1]!.content).toBe(
      units
        .slice(0, 25)
        .map((u, i) => `[${i + 1}] (user) ${u.text}`)
        .join('\n\n'),
    );
  });

  it('output outside the schema is a retryable ModelError', async () => {
    responders.push(answer({ scores: [{ id: '1', score: 11 }] }));
    const err = await openAIImportanceScorer(openAIModel(settings))
      .score([{ id: 'a', text: 'x', role: 'user' }])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).retryable).toBe(true);

    responders.push(json(200, completion('not json at all')));
    const err2 = await openAIReader(openAIModel(settings))
      .answer(readerInput)
      .catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(ModelError);
    expect((err2 as ModelError).message).toMatch(/not JSON/);
  });

  it("keeps none of the model's output in its error: the error of a retried activity is kept in the run's history, which no forget reaches", async () => {
    const sources = [{ id: 's1', text: 'Alice is allergic to orchids.' }];
    const summariser = openAISummariser(openAIModel(settings));
    responders.push(json(200, completion('Summary: Alice is allergic to orchids.')));
    responders.push(answer({ summary: 7, note: 'Alice is allergic to orchids.' }));
    for (const [i, why] of [/not JSON/, /does not match its schema/].entries()) {
      const err = await summariser.summarise(sources).catch((e: unknown) => e);
      expect(err, `answer ${i}`).toBeInstanceOf(ModelError);
      expect((err as ModelError).message).toMatch(why);
      expect(
        JSON.stringify({ message: (err as ModelError).message, details: (err as ModelError).details }),
      ).not.toMatch(/orchid/i);
    }
  });

  it('an error status becomes a typed ModelError, retryable only when a retry could help; the SDK does not retry', async () => {
    responders.push(json(503, { error: { message: 'overloaded', type: 'server_error' } }));
    const err = await openAIReader(openAIModel(settings))
      .answer(readerInput)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).retryable).toBe(true);
    expect((err as ModelError).details).toMatchObject({ status: 503 });
    expect(requests).toHaveLength(1);

    responders.push(json(401, { error: { message: 'bad key', type: 'invalid_request_error' } }));
    const err2 = await openAIJudge(openAIModel(settings))
      .correct({ question: 'q', reference: 'a', response: 'a' })
      .catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(ModelError);
    expect((err2 as ModelError).retryable).toBe(false);
    expect(requests).toHaveLength(2);
  });

  it('a request that outlives the timeout fails with a retryable ModelError', async () => {
    responders.push((_body, res) => {
      // Never answered in time; the timer only releases the socket at the end.
      pendingTimers.add(setTimeout(() => answer({ answer: 'late' })(_body, res), 60_000));
    });
    const err = await openAIReader(openAIModel({ ...settings, timeoutMs: 200 }))
      .answer(readerInput)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).message).toMatch(/timed out/);
    expect((err as ModelError).retryable).toBe(true);
    expect(requests).toHaveLength(1);
  });

  it('the summariser sends the sources in order and returns the summary', async () => {
    responders.push(answer({ summary: 'Notice period: 30 days (2024 contract), 14 days (2023 draft).' }));
    const summary = await openAISummariser(openAIModel(settings)).summarise([
      { id: 'a', text: 'The 2023 draft says 14 days notice.' },
      { id: 'b', text: 'The 2024 contract says 30 days notice.' },
    ]);
    expect(summary).toBe('Notice period: 30 days (2024 contract), 14 days (2023 draft).');
    const { body } = requests[0]!;
    expect(body.response_format?.json_schema?.name).toBe('summary');
    expect(body.messages[1]!.content).toBe(
      '[1] The 2023 draft says 14 days notice.\n\n[2] The 2024 contract says 30 days notice.',
    );
    expect(body.messages[0]!.content).toMatch(/keep every fact exactly/i);
  });

  it('the factory picks the OpenAI models when an endpoint is configured, the local ones otherwise', async () => {
    const local = createModels({
      openaiBaseUrl: undefined,
      openaiApiKey: undefined,
      openaiModel: 'm',
      openaiTimeoutMs: 1000,
    });
    expect(local.remote).toBe(false);
    expect(local.summariser).toBe(extractiveSummariser);
    expect(local.importance.name).toBe('heuristic');
    expect(chooseReader(local, 'evidence')).toBe(evidenceReader);
    expect(chooseJudge(local, 'match')).toBe(normalisedMatchJudge);
    expect(() => chooseReader(local, 'model')).toThrow(/OPENAI_BASE_URL/);
    expect(() => chooseJudge(local, 'model')).toThrow(/OPENAI_BASE_URL/);

    const remote = createModels({
      openaiBaseUrl: settings.baseURL,
      openaiApiKey: settings.apiKey,
      openaiModel: 'test-model',
      openaiTimeoutMs: 5_000,
    });
    expect(remote.remote).toBe(true);
    expect(chooseReader(remote, 'model').name).toBe('openai:test-model');
    // The evidence reader stays offline whatever is configured.
    expect(chooseReader(remote, 'evidence')).toBe(evidenceReader);
    responders.push(answer({ correct: true, reason: 'same value' }));
    expect(
      await chooseJudge(remote, 'model').correct({ question: 'q', reference: '4', response: 'four' }),
    ).toBe(true);
    expect(requests).toHaveLength(1);
  });
});
