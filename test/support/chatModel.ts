import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A chat-completions endpoint on 127.0.0.1 that answers the summariser's requests as the test
 * says: with a summary (as the JSON the summariser asks for), or with a refusal (HTTP 400, as
 * OpenAI's API refuses a request). Point OPENAI_BASE_URL at `url`.
 */
export interface ChatModel {
  url: string;
  close(): Promise<void>;
}

/** What the model answers a request: its summary, or a refusal with this message. */
export type ChatAnswer = string | { refuse: string };

export async function startChatModel(
  answer: (request: { body: string; lastMessage: string }) => ChatAnswer,
): Promise<ChatModel> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const { messages } = JSON.parse(body) as { messages: { content: string }[] };
      const answered = answer({ body, lastMessage: messages.at(-1)!.content });
      res.writeHead(typeof answered === 'string' ? 200 : 400, { 'content-type': 'application/json' });
      if (typeof answered !== 'string') {
        res.end(JSON.stringify({ error: { message: answered.refuse, type: 'invalid_request_error' } }));
        return;
      }
      res.end(
        JSON.stringify({
          id: 'chatcmpl-test',
          object: 'chat.completion',
          created: 1_700_000_000,
          model: 'test-model',
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: JSON.stringify({ summary: answered }) },
              finish_reason: 'stop',
              logprobs: null,
            },
          ],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    async close() {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
}

/** The summariser's sources, as it lists them in its last message: `[n] text`, a blank line apart. */
export function listedSources(lastMessage: string): { id: string; text: string }[] {
  return lastMessage
    .split('\n\n')
    .map((block, i) => ({ id: String(i), text: block.replace(/^\[\d+\] /, '') }));
}
