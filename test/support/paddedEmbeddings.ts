import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The real embeddings server, with each vector zero-padded to `dimensions` components: the
 * same similarities in another embedding space of the same model name, as a model asked for
 * another size gives. A test reaches a change of dimensions through it.
 */
export async function paddedEmbeddings(
  upstream: string,
  dimensions: number,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const answer = await fetch(`${upstream}${req.url!.replace(/^\/v1/, '')}`, {
          method: req.method,
          headers: { 'content-type': 'application/json' },
          body: req.method === 'POST' ? Buffer.concat(chunks) : undefined,
        });
        const body = (await answer.json()) as { data?: { embedding: number[] | string }[] };
        for (const d of body.data ?? []) {
          // The openai client asks for base64 (float32, little-endian) unless told otherwise.
          if (typeof d.embedding === 'string') {
            const floats = new Float32Array(Uint8Array.from(Buffer.from(d.embedding, 'base64')).buffer);
            const padded = new Float32Array(dimensions);
            padded.set(floats);
            d.embedding = Buffer.from(padded.buffer).toString('base64');
          } else
            d.embedding = [...d.embedding, ...new Array<number>(dimensions - d.embedding.length).fill(0)];
        }
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
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
