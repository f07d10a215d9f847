import { proxyEmbeddings } from './embeddingsProxy';

/** What a recording endpoint saw: each request's texts and kind, and the most in flight at once. */
export interface EmbeddingsRecord {
  requests: { input: string[]; inputType: string | undefined }[];
  mostInFlight: number;
}

/**
 * The real embeddings server behind a proxy that records every request: a test sees what
 * memgate asks an endpoint for, and how many requests it has there at once; with `busyUntil`,
 * a server that answers nothing until then.
 */
export async function recordingEmbeddings(
  upstream: string,
  opts: { busyUntil?: Promise<void> } = {},
): Promise<{ url: string; record: EmbeddingsRecord; close: () => Promise<void> }> {
  const record: EmbeddingsRecord = { requests: [], mostInFlight: 0 };
  let inFlight = 0;
  const proxy = await proxyEmbeddings(upstream, {
    ...opts,
    onRequest(body) {
      const { input, input_type } = body as { input: string | string[]; input_type?: string };
      record.requests.push({ input: typeof input === 'string' ? [input] : input, inputType: input_type });
      record.mostInFlight = Math.max(record.mostInFlight, ++inFlight);
      return () => inFlight--;
    },
  });
  return { ...proxy, record };
}
