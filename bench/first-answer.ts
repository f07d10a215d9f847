/**
 * A fresh process's first hybrid recall of one agent, for bench/recall: connects with the
 * configuration it is given (the bench's database and index directory), recalls once, and
 * prints {"processStartToAnswerMs", "connectToAnswerMs", "queryEmbeddingMs", "mode"}, the first
 * counted from the process's start (`performance.now()`: module loading included).
 */
import { MemgateClient } from '../client/client';
import { parseConfig } from '../core/config';

async function main() {
  const [agentId, query] = process.argv.slice(2);
  if (!agentId || !query) throw new Error('usage: first-answer <agentId> <query>');
  const config = parseConfig(process.env);
  const connected = performance.now();
  const client = await MemgateClient.connect(config, {
    temporalAddress: config.temporalAddress!,
    mongoUri: config.mongoUri!,
    embeddings: { url: config.embeddingsUrl! },
  });
  try {
    const result = await client.recall({ agentId, query, k: 10 });
    const answered = performance.now();
    console.log(
      JSON.stringify({
        processStartToAnswerMs: Math.round(answered),
        connectToAnswerMs: Math.round(answered - connected),
        queryEmbeddingMs:
          result.retrieval.mode === 'hybrid' ? Math.round(result.retrieval.queryEmbeddingMs) : null,
        mode: result.retrieval.mode,
        ...(result.retrieval.mode === 'lexical' ? { reason: result.retrieval.reason } : {}),
      }),
    );
  } finally {
    await client.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
