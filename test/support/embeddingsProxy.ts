import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a proxy may do around each request: see it go, and rewrite the answer. */
export interface ProxyHooks {
  /** Called with a POST's parsed body when it arrives; the returned function when it is answered. */
  onRequest?: (body: unknown) => () => void;
  /** Awaited before a request goes upstream: a server busy until it settles. */
  busyUntil?: Promise<void>;
  /** The upstream's parsed JSON answer, changed in place before it is sent on. */
  onAnswer?: (answer: { data?: { embedding: number[] | string }[] }) => void;
}

/**
 * The real embeddings server behind a local proxy, for tests that watch or change what it
 * answers. Returns the proxy's OpenAI-compatible base URL.
 */
export async function proxyEmbeddings(
  upstream: string,
  hooks: ProxyHooks,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        const answered =
          req.method === 'POST' ? hooks.onRequest?.(JSON.parse(body.toString('utf8'))) : undefined;
        try {
          await hooks.busyUntil;
          const answer = await fetch(`${upstream}${req.url!.replace(/^\/v1/, '')}`, {
            method: req.method,
            headers: { 'content-type': 'application/json' },
            body: req.method === 'POST' ? body : undefined,
          });
          const json = (await answer.json()) as { data?: { embedding: number[] | string }[] };
          hooks.onAnswer?.(json);
          res.writeHead(answer.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(json));
        } finally {
          answered?.();
        }
      })().catch((err: Error) => {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: err.message } }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
