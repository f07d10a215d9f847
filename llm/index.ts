import type { Config } from '../core/config';
import { InvalidConfigError } from '../core/errors';
import { evidenceReader, heuristicImportanceScorer, normalisedMatchJudge } from './local';
import type { ImportanceScorer, Judge, Reader } from './models';
import { openAIImportanceScorer, openAIJudge, openAIModel, openAIReader, openAISummariser } from './openai';
import { extractiveSummariser, type Summariser } from './summariser';
import { openAIEmbedder, type Embedder } from './embedder';

export interface Models {
  /** An OpenAI-compatible endpoint is configured; otherwise every role is local. */
  remote: boolean;
  summariser: Summariser;
  importance: ImportanceScorer;
  reader: Reader;
  judge: Judge;
}

/** The OpenAI implementations when OPENAI_BASE_URL is set, the deterministic local ones otherwise. */
export function createModels(
  config: Pick<Config, 'openaiBaseUrl' | 'openaiApiKey' | 'openaiModel' | 'openaiTimeoutMs'>,
): Models {
  if (!config.openaiBaseUrl) {
    return {
      remote: false,
      summariser: extractiveSummariser,
      importance: heuristicImportanceScorer,
      reader: evidenceReader,
      judge: normalisedMatchJudge,
    };
  }
  const model = openAIModel({
    baseURL: config.openaiBaseUrl,
    apiKey: config.openaiApiKey ?? '',
    model: config.openaiModel,
    timeoutMs: config.openaiTimeoutMs,
  });
  return {
    remote: true,
    summariser: openAISummariser(model),
    importance: openAIImportanceScorer(model),
    reader: openAIReader(model),
    judge: openAIJudge(model),
  };
}

export type ReaderChoice = 'evidence' | 'model';
export type JudgeChoice = 'match' | 'model';

function requireEndpoint(models: Models, what: string): void {
  if (!models.remote) {
    throw new InvalidConfigError(
      'OPENAI_BASE_URL',
      `an OpenAI-compatible endpoint, required by ${what}`,
      undefined,
    );
  }
}

/** The audit's reader: `evidence` is always local; `model` needs an endpoint. */
export function chooseReader(models: Models, choice: ReaderChoice): Reader {
  if (choice === 'evidence') return evidenceReader;
  requireEndpoint(models, 'the model reader');
  return models.reader;
}

export function chooseJudge(models: Models, choice: JudgeChoice): Judge {
  if (choice === 'match') return normalisedMatchJudge;
  requireEndpoint(models, 'the model judge');
  return models.judge;
}

/**
 * Where embeddings come from, as the caller resolved it (the configured URLs, the local
 * stack's servers), or why there is none: recall then says it is lexical only, never silently.
 * Queries go to one of `queryUrls` (the same model at each), passages to `passagesUrl`
 * (docs/serving.md, Embeddings in two lanes).
 */
export type EmbeddingsEndpoint = { queryUrls: string[]; passagesUrl: string } | { unavailable: string };

/** The embedder of the configured model, on the endpoints the caller resolved (configured or local). */
export function createEmbedder(
  config: Pick<
    Config,
    | 'embeddingsApiKey'
    | 'embeddingsModel'
    | 'embeddingsDimensions'
    | 'embeddingsQueryPrefix'
    | 'embeddingsPassagePrefix'
    | 'embeddingsInputType'
    | 'openaiTimeoutMs'
    | 'embeddingsInFlight'
  >,
  endpoint: { queryUrls: string[]; passagesUrl: string },
): Embedder {
  return openAIEmbedder({
    queryBaseURLs: endpoint.queryUrls,
    passagesBaseURL: endpoint.passagesUrl,
    // The SDK insists on a key; local servers ignore it.
    apiKey: config.embeddingsApiKey ?? 'none',
    model: config.embeddingsModel,
    dimensions: config.embeddingsDimensions,
    queryPrefix: config.embeddingsQueryPrefix,
    passagePrefix: config.embeddingsPassagePrefix,
    sendInputType: config.embeddingsInputType,
    timeoutMs: config.openaiTimeoutMs,
    passagesInFlight: config.embeddingsInFlight,
  });
}
