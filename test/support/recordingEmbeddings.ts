import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a recording endpoint saw: each request's texts and kind, and the most in flight at once. */
export interface EmbeddingsRecord {
  requests: { input: string[]; inputType: string | undefined }[];
  mostInFlight: number;
}

/**
 * The real embeddings server behind a proxy that records every request: a test sees what
 * memgate asks an endpoint for, and how many requests it has there at once.
 */
export async function recordingEmbeddings(
  upstream: string,
): Promise<{ url: string; record: EmbeddingsRecord; close: () => Promise<void> }> {
  const record: EmbeddingsRecord = { requests: [], mostInFlight: 0 };
  let inFlight = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        if (req.method === 'POST') {
          const { input, input_type } = JSON.parse(body.toString('utf8')) as {
            input: string | string[];
            input_type?: string;
          };
          record.requests.push({ input: typeof input === 'string' ? [input] : input, inputType: input_type });
        }
        inFlight++;
        record.mostInFlight = Math.max(record.mostInFlight, inFlight);
        try {
          const answer = await fetch(`${upstream}${req.url!.replace(/^\/v1/, '')}`, {
            method: req.method,
            headers: { 'content-type': 'application/json' },
            body: req.method === 'POST' ? body : undefined,
          });
          res.writeHead(answer.status, { 'content-type': 'application/json' });
          res.end(Buffer.from(await answer.arrayBuffer()));
        } finally {
          inFlight--;
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
    record,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
