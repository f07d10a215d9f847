import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import { z } from 'zod';
import { ModelError } from '../core/errors';
import {
  DONT_KNOW,
  type ImportanceScorer,
  type Judge,
  type JudgeInput,
  type Reader,
  type ReaderInput,
  type ScoredText,
} from './models';
import type { SummarySource, Summariser } from './summariser';

/**
 * The model roles on any OpenAI-compatible chat-completions endpoint, each answering in a
 * JSON schema (structured output) that is validated again on arrival.
 */
export interface OpenAISettings {
  baseURL: string;
  apiKey: string;
  model: string;
  timeoutMs: number;
}

export interface OpenAIModel {
  client: OpenAI;
  model: string;
}

export function openAIModel(s: OpenAISettings): OpenAIModel {
  // Retries belong to Temporal's activity retry policy: SDK retries would hide attempts from history.
  return {
    client: new OpenAI({ baseURL: s.baseURL, apiKey: s.apiKey, timeout: s.timeoutMs, maxRetries: 0 }),
    model: s.model,
  };
}

export function modelError(err: unknown): unknown {
  if (err instanceof APIConnectionTimeoutError) return new ModelError('the model request timed out', true);
  if (err instanceof APIError && err.status !== undefined) {
    const retryable = err.status === 408 || err.status === 409 || err.status === 429 || err.status >= 500;
    return new ModelError(`the model endpoint answered ${err.status}: ${err.message}`, retryable, {
      status: err.status,
    });
  }
  if (err instanceof APIConnectionError) {
    return new ModelError(`cannot reach the model endpoint: ${err.message}`, true);
  }
  return err;
}

/** One chat completion whose content must parse as JSON and match `schema`. */
export async function completeJson<T>(
  m: OpenAIModel,
  name: string,
  schema: z.ZodType<T>,
  system: string,
  user: string,
): Promise<T> {
  const { $schema: _dialect, ...jsonSchema } = z.toJSONSchema(schema) as Record<string, unknown>;
  let content: string | null | undefined;
  try {
    const completion = await m.client.chat.completions.create({
      model: m.model,
      temperature: 0,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      response_format: { type: 'json_schema', json_schema: { name, strict: true, schema: jsonSchema } },
    });
    content = completion.choices[0]?.message?.content;
  } catch (err) {
    throw modelError(err);
  }
  // Malformed output is retryable: another sample may comply, and the retry policy bounds it.
  // The error says where the output failed, never what it said: a retried activity's failure
  // stays in its run's history under the deployment's payload key, which no forget shreds, and
  // the output is made of memories (docs/erasure.md, Temporal history).
  if (!content) throw new ModelError(`${name}: the model returned no content`, true);
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    throw new ModelError(`${name}: the model's output is not JSON`, true, { length: content.length });
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    throw new ModelError(`${name}: the model's output does not match its schema`, true, {
      length: content.length,
      issues: result.error.issues.map((i) => `${i.path.join('.')}: ${i.code}`),
    });
  }
  return result.data;
}

const IMPORTANCE_SYSTEM =
  'You see memories from conversations between a user and an assistant. Rate each one from 1 ' +
  '(forgettable) to 10 (essential) for how important it is to remember in future conversations ' +
  'with this user in general. You are not told what will be asked later; do not guess a question. ' +
  'Return one score per memory id.';

const importanceSchema = z.strictObject({
  scores: z.array(z.strictObject({ id: z.string(), score: z.number().int().min(1).max(10) })),
});

/** Memories per request, and the characters of each one the model sees. */
const IMPORTANCE_BATCH = 25;
const IMPORTANCE_CHARS = 1500;

export function openAIImportanceScorer(m: OpenAIModel): ImportanceScorer {
  return {
    name: `openai:${m.model}`,
    async score(units: ScoredText[]) {
      const out: number[] = [];
      for (let start = 0; start < units.length; start += IMPORTANCE_BATCH) {
        const batch = units.slice(start, start + IMPORTANCE_BATCH);
        const listing = batch
          .map((u, i) => `[${i + 1}] (${u.role}) ${u.text.slice(0, IMPORTANCE_CHARS)}`)
          .join('\n\n');
        const { scores } = await completeJson(m, 'importance', importanceSchema, IMPORTANCE_SYSTEM, listing);
        const byId = new Map(scores.map((s) => [s.id.replace(/^\[|\]$/g, ''), s.score]));
        batch.forEach((_u, i) => {
          const score = byId.get(String(i + 1));
          if (score === undefined) {
            throw new ModelError(`importance: the model gave no score for memory ${i + 1}`, true);
          }
          out.push(score);
        });
      }
      return out;
    },
  };
}

const READER_SYSTEM =
  "You answer a question about a user's past conversations with an assistant, using only the " +
  'memory snippets given, each with its date and speaker. Answer briefly. If the snippets do not ' +
  `hold the answer, the answer must be exactly "${DONT_KNOW}" and nothing else.`;

const readerSchema = z.strictObject({ answer: z.string() });

/** The prompt a model reader sees: question, date and snippets; never the reference. */
export function readerPrompt(input: Pick<ReaderInput, 'question' | 'questionDate' | 'snippets'>): string {
  const snippets = input.snippets.map((s, i) => `[${i + 1}] ${s.date} (${s.role}): ${s.text}`).join('\n\n');
  return `Snippets:\n${snippets || '(none)'}\n\nToday is ${input.questionDate}.\nQuestion: ${input.question}`;
}

export function openAIReader(m: OpenAIModel): Reader {
  return {
    name: `openai:${m.model}`,
    async answer(input: ReaderInput) {
      const { answer } = await completeJson(m, 'reader', readerSchema, READER_SYSTEM, readerPrompt(input));
      return answer.trim();
    },
  };
}

const JUDGE_SYSTEM =
  'You grade a response to a question against the reference answer. It is correct only if it ' +
  'gives the answer the reference gives. Dates and numbers must match in value: different ' +
  "spellings of the same value match ('two weeks' and '14 days', '$50' and '50 dollars'), " +
  'different values never do. A response that declines or says it does not know is incorrect.';

const judgeSchema = z.strictObject({ correct: z.boolean(), reason: z.string() });

export function openAIJudge(m: OpenAIModel): Judge {
  return {
    name: `openai:${m.model}`,
    async correct(input: JudgeInput) {
      const { correct } = await completeJson(
        m,
        'judge',
        judgeSchema,
        JUDGE_SYSTEM,
        `Question: ${input.question}\nReference answer: ${input.reference}\nResponse: ${input.response}`,
      );
      return correct;
    },
  };
}

const SUMMARISER_SYSTEM =
  'You merge near-duplicate memories of one agent into a single summary. Keep every fact exactly: ' +
  'numbers with their units, dates, times, durations, money, percentages, quoted strings and ' +
  'proper names. Drop only repetition. When the memories disagree, keep both values and say which ' +
  'memory said which.';

const summarySchema = z.strictObject({ summary: z.string().min(1) });

/** Its summaries still pass the atom check (core/atoms.ts) before they are trusted as lossless. */
export function openAISummariser(m: OpenAIModel): Summariser {
  return {
    name: `openai:${m.model}`,
    async summarise(sources: readonly SummarySource[]) {
      const listing = sources.map((s, i) => `[${i + 1}] ${s.text}`).join('\n\n');
      const { summary } = await completeJson(m, 'summary', summarySchema, SUMMARISER_SYSTEM, listing);
      return summary.trim();
    },
  };
}
