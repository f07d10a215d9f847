import { z } from 'zod';
import { EvictionBoundaryError, InvalidConfigError } from './errors';
import { MIN_CONNECTIONS_PER_PROCESS } from './admission';
import { policyConflicts } from './policy';
import { MAX_WINDOW_CAPACITY } from './window/model';
import { maskUris } from './uri';

/**
 * The one configuration object. Each field is read from one environment variable, validated
 * on its own so an error names that variable, then checked as a whole. Defaults run on a
 * laptop with the local stack. `parseConfig` is pure: the caller hands it the environment.
 */

const port = z.coerce.number().int().min(1).max(65535);
const positive = z.coerce.number().positive();
const fraction = z.coerce.number().gt(0).lt(1);
const count = z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER);
/** The longest delay a Node timer holds; a longer one fires after 1 ms, with a warning. */
export const MAX_TIMER_MS = 2_147_483_647;
/** Milliseconds, which every `*_MS` setting is: each reaches a timer or a deadline. */
const milliseconds = z.coerce.number().int().min(0).max(MAX_TIMER_MS);
const positiveMs = milliseconds.positive();
/** Ten years: beyond it, the half-life in milliseconds stops being a number decay can use. */
const hours = positive.max(87_600);
/** A share of capacity: reclaim cannot let hot grow past the capacity itself. */
const share = positive.max(1);
const text = z.string().trim().min(1);
/** Query endpoints one process spreads its queries over (MEMGATE_EMBEDDINGS_URL). */
export const MAX_QUERY_SERVERS = 8;
const urlList = z
  .string()
  .transform((v) => v.split(',').map((u) => u.trim()))
  .pipe(
    z
      .array(z.url())
      .min(1)
      .max(MAX_QUERY_SERVERS)
      .refine((urls) => new Set(urls).size === urls.length, 'each URL once'),
  );
const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const clock = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'HH:MM, 24-hour');
const timezone = text.refine((tz) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}, 'an IANA time zone such as UTC or Europe/Berlin');

/**
 * The longest a recall may wait for an agent's vector index to load: more than loading the
 * most vectors a process holds (MEMGATE_VECTOR_INDEX_MAX_VECTORS' default) takes here.
 */
export const MAX_RECALL_INDEX_WAIT_MS = 600_000;

interface Spec<T> {
  env: string;
  schema: z.ZodType<T>;
  allowed: string;
  /** Default as the environment would spell it; absent means the variable is optional. */
  default?: string;
  doc: string;
  /** A credential, or a value that may hold one: an error names the variable, never the value. */
  secret?: true;
}

function spec<T>(s: Spec<T> & { default: string }): Spec<T> & { default: string };
function spec<T>(s: Spec<T>): Spec<T> & { default?: undefined };
function spec<T>(s: Spec<T>): Spec<T> {
  return s;
}

/** The variables, in the order docs/configuration.md documents them. */
export const CONFIG_SPECS = {
  temporalAddress: spec({
    env: 'TEMPORAL_ADDRESS',
    schema: text,
    allowed: 'host:port of a Temporal frontend',
    doc: 'Temporal server to use; unset starts the local stack',
  }),
  temporalTlsCaFile: spec({
    env: 'TEMPORAL_TLS_CA_FILE',
    schema: text,
    allowed: 'a PEM file path',
    doc: "CA certificate that signs the Temporal server's; setting any TEMPORAL_TLS_* turns TLS on",
  }),
  temporalTlsCertFile: spec({
    env: 'TEMPORAL_TLS_CERT_FILE',
    schema: text,
    allowed: 'a PEM file path, with TEMPORAL_TLS_KEY_FILE',
    doc: 'client certificate for mutual TLS',
  }),
  temporalTlsKeyFile: spec({
    env: 'TEMPORAL_TLS_KEY_FILE',
    schema: text,
    allowed: 'a PEM file path, with TEMPORAL_TLS_CERT_FILE',
    doc: 'client private key for mutual TLS',
  }),
  temporalTlsServerName: spec({
    env: 'TEMPORAL_TLS_SERVER_NAME',
    schema: text,
    allowed: 'a host name',
    doc: "name to expect in the Temporal server's certificate, when it differs from the address",
  }),
  temporalApiKey: spec({
    env: 'TEMPORAL_API_KEY',
    schema: text,
    allowed: 'a non-empty key',
    doc: 'API key for Temporal Cloud (implies TLS)',
    secret: true,
  }),
  temporalNamespace: spec({
    env: 'TEMPORAL_NAMESPACE',
    schema: text,
    allowed: 'a namespace name',
    default: 'default',
    doc: 'Temporal namespace',
  }),
  taskQueue: spec({
    env: 'MEMGATE_TASK_QUEUE',
    schema: text,
    allowed: 'a task queue name',
    default: 'memgate',
    doc: 'task queue of the memgate worker',
  }),
  workerBuildId: spec({
    env: 'MEMGATE_WORKER_BUILD_ID',
    schema: z
      .string()
      .trim()
      .regex(/^[A-Za-z0-9_-]{1,200}$/),
    allowed: 'letters, digits, _ and -, at most 200',
    doc: "the worker's version in the Worker Deployment named MEMGATE_TASK_QUEUE (docs/versioning.md); unset, the worker is unversioned",
  }),
  mongoUri: spec({
    env: 'MONGODB_URI',
    schema: z.string().regex(/^mongodb(\+srv)?:\/\//, 'mongodb:// or mongodb+srv:// URI'),
    allowed: 'a mongodb:// or mongodb+srv:// URI',
    doc: 'MongoDB-protocol server to use; unset starts the local stack. TLS and its CA go in the URI (`tls=true&tlsCAFile=…`)',
    secret: true,
  }),
  database: spec({
    env: 'MEMGATE_DB',
    schema: z.string().regex(/^[A-Za-z0-9_-]{1,63}$/),
    allowed: '1-63 of A-Z a-z 0-9 _ -',
    default: 'memgate',
    doc: 'database name',
  }),
  storeConnections: spec({
    env: 'MEMGATE_STORE_CONNECTIONS',
    schema: count.max(10_000),
    allowed: 'a positive integer of at most 10000',
    default: '200',
    doc: "connections the store server gives every memgate process of the deployment together: FerretDB's PostgreSQL pool (the local stack sizes its own to it). Each process takes an equal share, so that the processes' commands together never need more (docs/invariants.md, No store wedge)",
  }),
  storeProcesses: spec({
    env: 'MEMGATE_STORE_PROCESSES',
    schema: count.max(1_000),
    allowed:
      'a positive integer of at most 1000, leaving each process at least 3 of MEMGATE_STORE_CONNECTIONS',
    default: '8',
    doc: 'the most memgate processes (workers, servers, CLI commands) that use one store at once; every process of a deployment must be given the same two values',
  }),
  storeTimeoutMs: spec({
    env: 'MEMGATE_STORE_TIMEOUT_MS',
    schema: positiveMs.max(600_000),
    allowed: 'a positive integer of milliseconds, at most 600000',
    default: '15000',
    doc: 'the longest one store call (or one batch of a cursor), its wait for a connection included, may take before it fails as StackUnavailable naming the operation',
  }),
  stateDir: spec({
    env: 'MEMGATE_STATE_DIR',
    schema: text,
    allowed: 'a directory path',
    default: '.memgate',
    doc: 'local stack state (PostgreSQL and Temporal data, logs, pids)',
  }),
  cacheDir: spec({
    env: 'MEMGATE_CACHE_DIR',
    schema: text,
    allowed: 'a directory path',
    default: '~/.cache/memgate',
    doc: 'built server binaries, reused across clones',
  }),
  temporalPort: spec({
    env: 'MEMGATE_TEMPORAL_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    default: '7233',
    doc: 'local Temporal frontend port',
  }),
  temporalUiPort: spec({
    env: 'MEMGATE_TEMPORAL_UI_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    default: '8233',
    doc: 'local Temporal Web UI port',
  }),
  mongoPort: spec({
    env: 'MEMGATE_MONGO_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    default: '27017',
    doc: 'local FerretDB port',
  }),
  postgresPort: spec({
    env: 'MEMGATE_POSTGRES_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    default: '55432',
    doc: "local PostgreSQL port (FerretDB's storage); off 5432 so a system PostgreSQL is never reused",
  }),
  httpPort: spec({
    env: 'MEMGATE_HTTP_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    default: '8787',
    doc: 'port of the HTTP API (`memgate serve`, `npm start`)',
  }),
  metricsPort: spec({
    env: 'MEMGATE_METRICS_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    doc: "Prometheus endpoint (`/metrics`, on MEMGATE_HTTP_HOST) of a worker or server process: the Temporal SDK's metrics and memgate's; unset serves none",
  }),
  httpTlsCertFile: spec({
    env: 'MEMGATE_HTTP_TLS_CERT_FILE',
    schema: text,
    allowed: 'a PEM file path, with MEMGATE_HTTP_TLS_KEY_FILE',
    doc: 'serve the HTTP API over TLS with this certificate (chain)',
  }),
  httpTlsKeyFile: spec({
    env: 'MEMGATE_HTTP_TLS_KEY_FILE',
    schema: text,
    allowed: 'a PEM file path, with MEMGATE_HTTP_TLS_CERT_FILE',
    doc: "the HTTP API certificate's private key",
  }),
  httpRequestTimeoutMs: spec({
    env: 'MEMGATE_HTTP_REQUEST_TIMEOUT_MS',
    schema: milliseconds.min(1_000).max(600_000),
    allowed: 'a positive integer of milliseconds, from 1000 to 600000',
    default: '30000',
    doc: 'the longest a request may take to arrive, headers and body, before its connection is cut off with 408: a client that trickles a request in a byte at a time holds a connection no longer than this (and up to a quarter of it more, the interval connections are checked at)',
  }),
  apiKey: spec({
    env: 'MEMGATE_API_KEY',
    schema: text,
    allowed: 'an API key from `memgate keys create`',
    doc: 'the API key `memgate mcp` acts with (required there): its scope bounds every tool call',
  }),
  httpRateLimit: spec({
    env: 'MEMGATE_HTTP_RATE_LIMIT',
    schema: count.max(1_000_000),
    allowed: 'a positive integer of at most 1000000',
    default: '1200',
    doc: 'requests a minute one API key (or, without one, one address) may make of one `memgate serve` (HTTP and MCP); past it a call is 429 RateLimited with Retry-After, before anything is read, so one caller cannot slow the others. A key the process has not yet seen authenticated counts against its address as well, so made-up keys get no share each. Each serve process counts its own',
  }),
  httpInFlightPerKey: spec({
    env: 'MEMGATE_HTTP_IN_FLIGHT_PER_KEY',
    schema: count.max(10_000),
    allowed: 'a positive integer of at most 10000',
    default: '4',
    doc: 'calls one API key (or, without one, one address) may have answered at once by one `memgate serve` (HTTP and MCP); more wait their turn, in order (MEMGATE_HTTP_QUEUED_PER_KEY). It bounds what one caller costs at any moment, which a count per minute does not (a deep recall can cost a thousand cheap calls)',
  }),
  httpQueuedPerKey: spec({
    env: 'MEMGATE_HTTP_QUEUED_PER_KEY',
    schema: z.coerce.number().int().min(0).max(10_000),
    allowed: 'an integer from 0 to 10000',
    default: '64',
    doc: 'calls of one API key (or address) that may wait for one of its MEMGATE_HTTP_IN_FLIGHT_PER_KEY places; one more is 429 RateLimited at once. Waiting, a flood of calls costs the server nothing, where calls refused at once come straight back',
  }),
  keyMaxAgents: spec({
    env: 'MEMGATE_KEY_MAX_AGENTS',
    schema: count.max(10_000_000),
    allowed: 'a positive integer of at most 10000000',
    default: '1000',
    doc: 'agents one API key may write for over HTTP and MCP (each is a workflow that runs as long as the agent, and a child every night); a write for one more is 403 QuotaExceeded, and erasing an agent gives its place back. Counted in the store, across every serve process',
  }),
  keyMaxWindows: spec({
    env: 'MEMGATE_KEY_MAX_WINDOWS',
    schema: count.max(1_000_000),
    allowed: 'a positive integer of at most 1000000',
    default: '100',
    doc: 'context window sessions one API key may hold open over HTTP and MCP; opening one more is 403 QuotaExceeded, and closing one gives its place back',
  }),
  httpHost: spec({
    env: 'MEMGATE_HTTP_HOST',
    schema: text,
    allowed: 'a host name or IP address of this machine',
    default: '127.0.0.1',
    doc: 'address the HTTP API listens on; only this machine by default',
  }),
  codecOrigins: spec({
    env: 'MEMGATE_CODEC_ORIGINS',
    schema: text.transform((v, ctx) => {
      const origins = v.split(',').map((o) => o.trim());
      for (const o of origins) {
        if (!/^https?:\/\/[^/\s]+$/.test(o))
          ctx.addIssue({ code: 'custom', message: `${o} is not an origin` });
      }
      return origins;
    }),
    allowed: 'comma-separated origins (scheme://host[:port])',
    doc: "Temporal UIs allowed to call the codec endpoint (`/codec/decode`) from a browser, besides the local stack's own UI",
  }),
  logLevel: spec({
    env: 'MEMGATE_LOG_LEVEL',
    schema: z.enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR']),
    allowed: 'TRACE, DEBUG, INFO, WARN or ERROR',
    default: 'WARN',
    doc: 'worker log level',
  }),
  halfLifeHours: spec({
    env: 'MEMGATE_HALF_LIFE_HOURS',
    schema: hours,
    allowed: 'a positive number of hours, at most 87600 (ten years)',
    default: '72',
    doc: 'salience half-life',
  }),
  gateThreshold: spec({
    env: 'MEMGATE_GATE_THRESHOLD',
    schema: fraction,
    allowed: 'a number in (0, 1)',
    default: '0.15',
    doc: 'recall gate: entries below it are dormant',
  }),
  reclaimFloor: spec({
    env: 'MEMGATE_RECLAIM_FLOOR',
    schema: fraction,
    allowed: 'a number in (0, 1), below MEMGATE_GATE_THRESHOLD',
    default: '0.05',
    doc: 'eviction floor; must be below the gate',
  }),
  refreshWindowHours: spec({
    env: 'MEMGATE_REFRESH_WINDOW_HOURS',
    schema: positive,
    allowed: 'a positive number of hours',
    default: '168',
    doc: 'how long after dormantAt a query can still refresh an entry',
  }),
  maxTextChars: spec({
    env: 'MEMGATE_MAX_TEXT_CHARS',
    schema: count,
    allowed: 'a positive integer',
    default: '16000',
    doc: 'largest entry text accepted',
  }),
  maxEntriesPerWrite: spec({
    env: 'MEMGATE_MAX_ENTRIES_PER_WRITE',
    schema: count,
    allowed: 'a positive integer',
    default: '100',
    doc: 'most entries one write may carry',
  }),
  hotCapacity: spec({
    env: 'MEMGATE_HOT_CAPACITY',
    schema: count,
    allowed: 'a positive integer',
    default: '250000',
    doc: 'hot entries per agent before reclaim',
  }),
  highWatermark: spec({
    env: 'MEMGATE_HIGH_WATERMARK',
    schema: share,
    allowed: 'a positive fraction of capacity, at most 1',
    default: '1',
    doc: 'reclaim starts above capacity × this',
  }),
  lowWatermark: spec({
    env: 'MEMGATE_LOW_WATERMARK',
    schema: share,
    allowed: 'a positive fraction of capacity, at most the high watermark',
    default: '0.9',
    doc: 'reclaim stops at capacity × this',
  }),
  evictLossySubsumed: spec({
    env: 'MEMGATE_EVICT_LOSSY_SUBSUMED',
    schema: bool,
    allowed: 'true or false',
    default: 'false',
    doc: 'opt in to deleting dead entries subsumed only by a lossy summary',
  }),
  nightlyAt: spec({
    env: 'MEMGATE_NIGHTLY_AT',
    schema: clock,
    allowed: 'HH:MM, 24-hour',
    default: '03:00',
    doc: 'local time of the nightly consolidation',
  }),
  nightlyTimezone: spec({
    env: 'MEMGATE_NIGHTLY_TZ',
    schema: timezone,
    allowed: 'an IANA time zone',
    default: 'UTC',
    doc: 'time zone of MEMGATE_NIGHTLY_AT',
  }),
  nightlyCatchupHours: spec({
    env: 'MEMGATE_NIGHTLY_CATCHUP_HOURS',
    schema: positive,
    allowed: 'a positive number of hours',
    default: '6',
    doc: 'how late a missed nightly run may still start',
  }),
  consolidationConcurrency: spec({
    env: 'MEMGATE_CONSOLIDATION_CONCURRENCY',
    schema: count,
    allowed: 'a positive integer',
    default: '4',
    doc: 'agents consolidated at once',
  }),
  refreshByMeaning: spec({
    env: 'MEMGATE_REFRESH_BY_MEANING',
    schema: bool,
    allowed: 'true or false',
    default: 'true',
    doc: 'a logged recall also refreshes the entries it found by meaning (semantically), not only those sharing half its terms',
  }),
  refreshSalience: spec({
    env: 'MEMGATE_REFRESH_SALIENCE',
    schema: z.coerce.number().gt(0).max(1),
    allowed: 'a number in (0, 1], above MEMGATE_GATE_THRESHOLD',
    default: '0.5',
    doc: 'salience a query-refreshed entry restarts from',
  }),
  clusterSimilarity: spec({
    env: 'MEMGATE_CLUSTER_SIMILARITY',
    schema: fraction,
    allowed: 'a number in (0, 1)',
    default: '0.6',
    doc: 'lexical (cosine) similarity at which entries are near-duplicates',
  }),
  clusterNeighbours: spec({
    env: 'MEMGATE_CLUSTER_NEIGHBOURS',
    schema: count,
    allowed: 'a positive integer',
    default: '4',
    doc: 'top-K neighbours merged with an entry into one summary',
  }),
  clusterByMeaning: spec({
    env: 'MEMGATE_CLUSTER_BY_MEANING',
    schema: bool,
    allowed: 'true or false',
    default: 'false',
    doc: 'near-duplicates are also found by the similarity of their embeddings, not only of their terms (what a summary keeps is still decided by the atom check)',
  }),
  clusterMeaningSimilarity: spec({
    env: 'MEMGATE_CLUSTER_MEANING_SIMILARITY',
    schema: fraction,
    allowed: 'a number in (0, 1)',
    default: '0.96',
    doc: "embedding (cosine) similarity at which entries are near-duplicates, with MEMGATE_CLUSTER_BY_MEANING; it depends on the model (the local model's rewordings of one fact score 0.93-0.99, two facts about one thing 0.85-0.96)",
  }),
  writeTimeoutMs: spec({
    env: 'MEMGATE_WRITE_TIMEOUT_MS',
    schema: positiveMs,
    allowed: `a positive integer of milliseconds, at most ${MAX_TIMER_MS}`,
    default: '30000',
    doc: 'how long a client write waits for its acknowledgement before StackUnavailable (resending it is safe)',
  }),
  queryLogRetentionDays: spec({
    env: 'MEMGATE_QUERY_LOG_RETENTION_DAYS',
    schema: count,
    allowed: 'a positive integer number of days',
    default: '30',
    doc: 'how long the query log keeps a recall; the nightly run drops older ones after reading them',
  }),
  ledgerRetentionDays: spec({
    env: 'MEMGATE_LEDGER_RETENTION_DAYS',
    schema: count,
    allowed: 'a positive integer number of days',
    default: '365',
    doc: 'how long the ledger keeps a lifecycle event (tombstones, the proof of a deletion, stay)',
  }),
  runRetentionDays: spec({
    env: 'MEMGATE_RUN_RETENTION_DAYS',
    schema: count,
    allowed: 'a positive integer number of days',
    default: '365',
    doc: 'how long the record of a nightly run is kept',
  }),
  auditRetentionDays: spec({
    env: 'MEMGATE_AUDIT_RETENTION_DAYS',
    schema: count,
    allowed: 'a positive integer number of days',
    default: '180',
    doc: 'how long audit records are kept',
  }),
  nightlyBatch: spec({
    env: 'MEMGATE_NIGHTLY_BATCH',
    schema: count,
    allowed: 'a positive integer',
    default: '500',
    doc: 'entries per batch (and heartbeat) in the nightly phases',
  }),
  openaiBaseUrl: spec({
    env: 'OPENAI_BASE_URL',
    schema: z.url(),
    allowed: 'an http(s) URL',
    doc: 'OpenAI-compatible endpoint; unset uses the local deterministic models',
  }),
  openaiApiKey: spec({
    env: 'OPENAI_API_KEY',
    schema: text,
    allowed: 'a non-empty key',
    doc: 'key for OPENAI_BASE_URL',
    secret: true,
  }),
  openaiModel: spec({
    env: 'MEMGATE_OPENAI_MODEL',
    schema: text,
    allowed: 'a model name',
    default: 'gpt-4o-mini',
    doc: 'model for the OpenAI-compatible adapters',
  }),
  openaiTimeoutMs: spec({
    env: 'MEMGATE_OPENAI_TIMEOUT_MS',
    schema: positiveMs,
    allowed: `a positive integer of milliseconds, at most ${MAX_TIMER_MS}`,
    default: '30000',
    doc: 'per-request model timeout',
  }),
  embeddingsUrls: spec({
    env: 'MEMGATE_EMBEDDINGS_URL',
    schema: urlList,
    allowed: `an http(s) URL, or up to ${MAX_QUERY_SERVERS} different ones (the same model) separated by commas`,
    doc: "OpenAI-compatible embeddings endpoint (`…/v1`) for semantic recall, or several serving the same model: a query goes to the one with the fewest of this process's queries in flight, so an agent whose recalls never pause holds one server at a time, not the next agent's query (docs/serving.md, Embeddings in two lanes). Unset uses the local stack's own query servers, or none (lexical recall only, said in every result) with a remote stack",
  }),
  embeddingsPassagesUrl: spec({
    env: 'MEMGATE_EMBEDDINGS_PASSAGES_URL',
    schema: z.url(),
    allowed: 'an http(s) URL',
    doc: "OpenAI-compatible endpoint (`…/v1`, same model) that embeds passages: writes' entries, the nights' and `reembed`'s; queries go to MEMGATE_EMBEDDINGS_URL. Apart, a backlog of passages never holds a recall up at a server that embeds one request at a time, as the local stack's do (it runs its own for passages). Unset: the first of MEMGATE_EMBEDDINGS_URL when that is set, else the local stack's passage server",
  }),
  embeddingsApiKey: spec({
    env: 'MEMGATE_EMBEDDINGS_API_KEY',
    schema: text,
    allowed: 'a non-empty key',
    doc: 'key for MEMGATE_EMBEDDINGS_URL, when it needs one',
    secret: true,
  }),
  embeddingsModel: spec({
    env: 'MEMGATE_EMBEDDINGS_MODEL',
    schema: text,
    allowed: 'a model name',
    default: 'multilingual-e5-small-q4',
    doc: 'embedding model; each vector records it, and a change is reported until `memgate reembed` converts the store',
  }),
  embeddingsDimensions: spec({
    env: 'MEMGATE_EMBEDDINGS_DIMENSIONS',
    schema: count.max(8192),
    allowed: 'a positive integer up to 8192',
    default: '384',
    doc: "the model's vector size; an endpoint answering another size is refused",
  }),
  embeddingsQueryPrefix: spec({
    env: 'MEMGATE_EMBEDDINGS_QUERY_PREFIX',
    schema: z.string().max(100),
    allowed: 'at most 100 characters',
    default: '',
    doc: 'text put before a query, for asymmetric models whose server does not add it (e5: `query: `)',
  }),
  embeddingsPassagePrefix: spec({
    env: 'MEMGATE_EMBEDDINGS_PASSAGE_PREFIX',
    schema: z.string().max(100),
    allowed: 'at most 100 characters',
    default: '',
    doc: 'text put before a stored memory, for asymmetric models whose server does not add it (e5: `passage: `)',
  }),
  embeddingsInputType: spec({
    env: 'MEMGATE_EMBEDDINGS_INPUT_TYPE',
    schema: bool,
    allowed: 'true or false',
    default: 'true',
    doc: "send `input_type` (query or passage) with each request, as the local server (which adds e5's prefixes itself) expects; false for OpenAI's own API",
  }),
  embeddingsInFlight: spec({
    env: 'MEMGATE_EMBEDDINGS_IN_FLIGHT',
    schema: count.max(1_000),
    allowed: 'a positive integer of at most 1000',
    default: '4',
    doc: "requests of passages (writes' and nights' embeddings) one process has in flight at the embeddings endpoint at once; the rest wait in the process, so a request's timeout counts the endpoint's time, not its queue's. A query's embedding never waits behind them",
  }),
  embeddingsPort: spec({
    env: 'MEMGATE_EMBEDDINGS_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    default: '8790',
    doc: "port of the local stack's first embeddings server for queries (a recall's); the others take the ports after it",
  }),
  embeddingsQueryServers: spec({
    env: 'MEMGATE_EMBEDDINGS_QUERY_SERVERS',
    schema: count.max(MAX_QUERY_SERVERS),
    allowed: `a positive integer of at most ${MAX_QUERY_SERVERS}`,
    default: '2',
    doc: "embeddings servers for queries the local stack runs, on consecutive ports from MEMGATE_EMBEDDINGS_PORT. Each embeds one request at a time and an agent's queries embed one at a time, so with two, one agent that recalls without pause never makes another agent's query wait",
  }),
  embeddingsPassagesPort: spec({
    env: 'MEMGATE_EMBEDDINGS_PASSAGES_PORT',
    schema: port,
    allowed: 'a TCP port 1-65535',
    default: '8789',
    doc: "port of the local embeddings server for passages (stored memories); not one of the query servers' ports",
  }),
  vectorIndexMaxVectors: spec({
    env: 'MEMGATE_VECTOR_INDEX_MAX_VECTORS',
    schema: count,
    allowed: 'a positive integer',
    default: '1000000',
    doc: "vectors one process holds in memory (about 1 KB each at 384 dimensions, in its vector engine thread), over all agents, its recall and its worker's clustering by meaning together, loads in flight counted; past it the least recently recalled agent's index is dropped, and an agent larger than the whole budget is recalled lexically, said in its results, until it shrinks to fit",
  }),
  vectorIndexDir: spec({
    env: 'MEMGATE_VECTOR_INDEX_DIR',
    schema: text,
    allowed: 'a directory path',
    default: '.memgate/vector-indexes',
    doc: "where a recall-serving process persists its agents' vector indexes (derived from the store, never the only copy), so that a restart opens them and reads only the changes since instead of every vector; one directory per process, on its own disk: a process that finds it kept by another running one (its `owner.pid`) loads from the store and persists nothing, with a warning",
  }),
  recallIndexWaitMs: spec({
    env: 'MEMGATE_RECALL_INDEX_WAIT_MS',
    schema: milliseconds.max(MAX_RECALL_INDEX_WAIT_MS),
    allowed: `milliseconds, 0 to ${MAX_RECALL_INDEX_WAIT_MS}`,
    default: '2000',
    doc: "how long a recall waits for the agent's vector index to open or catch up in the serving process (a load from the store when none was persisted takes minutes at 500,000 vectors); past a load it is lexical, past a catch-up it searches the index as it stands, saying so, and the work goes on; a one-shot `memgate recall` waits",
  }),
  windowTokens: spec({
    env: 'MEMGATE_WINDOW_TOKENS',
    schema: z.coerce.number().int().positive().max(MAX_WINDOW_CAPACITY),
    allowed: `a positive integer of tokens, at most ${MAX_WINDOW_CAPACITY}`,
    default: '40000',
    doc: 'token capacity of a new context window session',
  }),
  windowDecay: spec({
    env: 'MEMGATE_WINDOW_DECAY',
    schema: fraction,
    allowed: 'a number in (0, 1)',
    default: '0.85',
    doc: 'per-turn salience multiplier of context window segments',
  }),
  rehydrationThreshold: spec({
    env: 'MEMGATE_REHYDRATION_THRESHOLD',
    schema: fraction,
    allowed: 'a number in (0, 1)',
    default: '0.6',
    doc: 'least salience at which an evicted segment may come back',
  }),
  rehydrationMargin: spec({
    env: 'MEMGATE_REHYDRATION_MARGIN',
    schema: fraction,
    allowed: 'a number in (0, 1)',
    default: '0.1',
    doc: 'at capacity, how much a rehydrated segment must beat each one it displaces',
  }),
} as const;

type Specs = typeof CONFIG_SPECS;
type Value<S> = S extends Spec<infer T> ? T : never;
export type Config = {
  [K in keyof Specs]: Specs[K] extends { default: string } ? Value<Specs[K]> : Value<Specs[K]> | undefined;
};

/** What an error shows in place of a secret's value. */
const HIDDEN = '(hidden)';

/** A value as an error shows it: a secret not at all, any URI in it without its password. */
function shown(s: Spec<unknown>, value: string): string {
  return s.secret ? HIDDEN : maskUris(value);
}

/** A URI as it may be printed (core/uri.ts): any password in it replaced. */
export { maskUri } from './uri';

/**
 * Settings memgate no longer reads, with what replaced them: one still set would otherwise be
 * ignored without a word, and its owner left believing it applies.
 */
const RETIRED: Record<string, string> = {
  MEMGATE_SEMANTIC_MIN_SIMILARITY:
    "retired: a fixed similarity floor belongs to one model; hybrid recall now measures each similarity against the query's own background (docs/recall.md, Relevance), so unset it",
};

export function parseConfig(env: Record<string, string | undefined>): Config {
  for (const [variable, why] of Object.entries(RETIRED)) {
    if (env[variable] !== undefined && env[variable] !== '')
      throw new InvalidConfigError(variable, why, env[variable]);
  }
  const out: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(CONFIG_SPECS) as [string, Spec<unknown>][]) {
    const raw = env[s.env] === '' ? undefined : env[s.env];
    const value = raw ?? s.default;
    if (value === undefined) {
      out[key] = undefined;
      continue;
    }
    const parsed = s.schema.safeParse(value);
    if (!parsed.success) throw new InvalidConfigError(s.env, s.allowed, shown(s, value));
    out[key] = parsed.data;
  }
  const config = out as Config;
  assertEvictionBoundary(config.reclaimFloor, config.gateThreshold);
  for (const { field } of policyConflicts(config)) {
    const s = CONFIG_SPECS[field];
    throw new InvalidConfigError(s.env, s.allowed, config[field]);
  }
  // A certificate without its key (or the other way round) is half a client identity.
  for (const [a, b] of [
    ['temporalTlsCertFile', 'temporalTlsKeyFile'],
    ['httpTlsCertFile', 'httpTlsKeyFile'],
  ] as const) {
    if ((config[a] === undefined) !== (config[b] === undefined)) {
      const missing = config[a] === undefined ? a : b;
      throw new InvalidConfigError(CONFIG_SPECS[missing].env, CONFIG_SPECS[missing].allowed, undefined);
    }
  }
  if (Math.floor(config.storeConnections / config.storeProcesses) < MIN_CONNECTIONS_PER_PROCESS) {
    const s = CONFIG_SPECS.storeProcesses;
    throw new InvalidConfigError(s.env, s.allowed, config.storeProcesses);
  }
  // The query servers take consecutive ports; the passage server must be none of them.
  const lastQueryPort = config.embeddingsPort + config.embeddingsQueryServers - 1;
  if (lastQueryPort > 65535) {
    const s = CONFIG_SPECS.embeddingsQueryServers;
    throw new InvalidConfigError(
      s.env,
      `${s.allowed}, its ports after MEMGATE_EMBEDDINGS_PORT at most 65535`,
      config.embeddingsQueryServers,
    );
  }
  if (
    config.embeddingsPassagesPort >= config.embeddingsPort &&
    config.embeddingsPassagesPort <= lastQueryPort
  ) {
    const s = CONFIG_SPECS.embeddingsPassagesPort;
    throw new InvalidConfigError(
      s.env,
      `${s.allowed}, outside the query servers' ${config.embeddingsPort}-${lastQueryPort}`,
      config.embeddingsPassagesPort,
    );
  }
  if (config.openaiBaseUrl && !config.openaiApiKey) {
    throw new InvalidConfigError('OPENAI_API_KEY', 'required when OPENAI_BASE_URL is set', undefined);
  }
  return config;
}

/**
 * A floor at or above the gate cannot tell dormant from dead
 * (docs/invariants.md, Eviction boundary).
 */
export function assertEvictionBoundary(reclaimFloor: number, gateThreshold: number): void {
  if (reclaimFloor >= gateThreshold) {
    throw new EvictionBoundaryError(
      `reclaimFloor (${reclaimFloor}) must be below gateThreshold (${gateThreshold}): the policy could not tell dormant from dead`,
      { reclaimFloor, gateThreshold },
    );
  }
}
