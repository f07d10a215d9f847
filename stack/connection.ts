import { readFileSync } from 'node:fs';
import type { TLSConfig } from '@temporalio/client';
import type { Config } from '../core/config';
import { CONFIG_SPECS } from '../core/config';
import { InvalidConfigError } from '../core/errors';
import type { EmbeddingsEndpoint } from '../llm';
import { embeddingsSilent, endpoints, localEmbeddingsUnavailable, type StackSettings } from './stack';

/** A PEM file a setting names, or InvalidConfig naming the setting. */
function pem(key: 'temporalTlsCaFile' | 'temporalTlsCertFile' | 'temporalTlsKeyFile', path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new InvalidConfigError(
      CONFIG_SPECS[key].env,
      `${CONFIG_SPECS[key].allowed} that can be read (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`,
      path,
    );
  }
}

/**
 * How a client or worker connects to Temporal: the address, TLS when any TEMPORAL_TLS_*
 * setting or an API key asks for it (Temporal Cloud takes an API key over TLS), and the key.
 * The same options serve `Connection` and `NativeConnection`.
 */
export function temporalConnectionOptions(
  c: Pick<
    Config,
    | 'temporalTlsCaFile'
    | 'temporalTlsCertFile'
    | 'temporalTlsKeyFile'
    | 'temporalTlsServerName'
    | 'temporalApiKey'
  >,
  address: string,
): { address: string; tls?: TLSConfig | true; apiKey?: string } {
  const tls: TLSConfig = {
    ...(c.temporalTlsCaFile && { serverRootCACertificate: pem('temporalTlsCaFile', c.temporalTlsCaFile) }),
    ...(c.temporalTlsCertFile &&
      c.temporalTlsKeyFile && {
        clientCertPair: {
          crt: pem('temporalTlsCertFile', c.temporalTlsCertFile),
          key: pem('temporalTlsKeyFile', c.temporalTlsKeyFile),
        },
      }),
    ...(c.temporalTlsServerName && { serverNameOverride: c.temporalTlsServerName }),
  };
  const wantsTls = Object.keys(tls).length > 0 || c.temporalApiKey !== undefined;
  return {
    address,
    ...(wantsTls && { tls: Object.keys(tls).length > 0 ? tls : true }),
    ...(c.temporalApiKey !== undefined && { apiKey: c.temporalApiKey }),
  };
}

type EmbeddingsConfig = Pick<Config, 'embeddingsUrls' | 'embeddingsPassagesUrl'>;

/**
 * The endpoints MEMGATE_EMBEDDINGS_URL names, passages at MEMGATE_EMBEDDINGS_PASSAGES_URL or
 * else the first of them; undefined while it is unset.
 */
export function configuredEmbeddings(
  c: EmbeddingsConfig,
): { queryUrls: string[]; passagesUrl: string } | undefined {
  if (!c.embeddingsUrls) return undefined;
  return { queryUrls: c.embeddingsUrls, passagesUrl: c.embeddingsPassagesUrl ?? c.embeddingsUrls[0]! };
}

/** The local stack's query servers, and its passage server unless MEMGATE_EMBEDDINGS_PASSAGES_URL names another. */
export function localEmbeddings(
  c: EmbeddingsConfig,
  settings: StackSettings,
): { queryUrls: string[]; passagesUrl: string } {
  const local = endpoints(settings);
  return {
    queryUrls: local.embeddingsQueryUrls,
    passagesUrl: c.embeddingsPassagesUrl ?? local.embeddingsPassagesUrl,
  };
}

/**
 * Where embeddings come from: the configured endpoints; else, with the local stack, its own
 * servers when they answer; else none, with the reason recall will give for being lexical only.
 */
export async function resolveEmbeddings(
  c: EmbeddingsConfig & {
    temporalAddress?: string | undefined;
    mongoUri?: string | undefined;
  },
  settings: StackSettings,
): Promise<EmbeddingsEndpoint> {
  const configured = configuredEmbeddings(c);
  if (configured) return configured;
  if (c.temporalAddress && c.mongoUri) {
    return {
      unavailable: 'no embeddings endpoint: MEMGATE_EMBEDDINGS_URL is unset and the stack is not local',
    };
  }
  const silent = await embeddingsSilent(settings);
  if (silent === undefined) return localEmbeddings(c, settings);
  return { unavailable: localEmbeddingsUnavailable(settings) ?? `local: ${silent}` };
}
