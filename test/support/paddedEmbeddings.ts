import { proxyEmbeddings } from './embeddingsProxy';

/**
 * The real embeddings server, with each vector zero-padded to `dimensions` components: the
 * same similarities in another embedding space of the same model name, as a model asked for
 * another size gives. A test reaches a change of dimensions through it.
 */
export function paddedEmbeddings(
  upstream: string,
  dimensions: number,
): Promise<{ url: string; close: () => Promise<void> }> {
  return proxyEmbeddings(upstream, {
    onAnswer(body) {
      for (const d of body.data ?? []) {
        // The openai client asks for base64 (float32, little-endian) unless told otherwise.
        if (typeof d.embedding === 'string') {
          const floats = new Float32Array(Uint8Array.from(Buffer.from(d.embedding, 'base64')).buffer);
          const padded = new Float32Array(dimensions);
          padded.set(floats);
          d.embedding = Buffer.from(padded.buffer).toString('base64');
        } else d.embedding = [...d.embedding, ...new Array<number>(dimensions - d.embedding.length).fill(0)];
      }
    },
  });
}
