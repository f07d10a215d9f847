import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { createKey } from '../../store/keys';
import { SCHEMATHESIS_PYTHON, pythonWith } from '../support/python';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * The HTTP API fuzzed from its own OpenAPI document: schemathesis reads `/openapi.json` from
 * the listening server and sends what the document allows (and, in negative mode, what it
 * forbids), against the real stack with a key for every agent. No answer may be a 5xx, every
 * answer's status must be one the operation documents and its body must match that status's
 * schema, and a request the document forbids must be refused with a 4xx.
 */

/** Per operation and phase; small, so the run stays within a few minutes on two cores. */
const MAX_EXAMPLES = 25;
/** Fixed, so a failure found once is found again. */
const SEED = 20_240_611;
/** The whole run, schemathesis's startup included. */
const RUN_TIMEOUT_MS = 180_000;

/**
 * What is checked. Left out: `positive_data_acceptance` (a valid request may still be refused
 * by state the document cannot describe: 404 for a window never opened or an entry never
 * written, 409 for a closed window), `unsupported_method` and `allow_header_conformance`
 * (a method the document does not list is answered as any unknown route is, 404 NotFound, not
 * 405), and the stateful and authorization checks (`use_after_free`,
 * `ensure_resource_availability`, `object_level_authorization`), which need links between
 * operations the document does not declare; key scopes are covered by http-keys.test.ts.
 */
const CHECKS = [
  'not_a_server_error',
  'status_code_conformance',
  'content_type_conformance',
  'response_headers_conformance',
  'response_schema_conformance',
  'negative_data_rejection',
  'missing_required_header',
  'ignored_auth',
];

let env: TestEnv;
let python: string;
let server: RunningServer;
let key: string;
let workDir: string;

beforeAll(async () => {
  env = await startTestEnv();
  python = await pythonWith(env.config.cacheDir, [SCHEMATHESIS_PYTHON]);
  // One key sends every request of the run, faster than the default share of a key allows;
  // a 429 would tell the checks nothing about the operation it refused.
  server = await startHttpServer(env.client, { ...env.config, httpRateLimit: 1_000_000 }, { port: 0 });
  ({ key } = await createKey(env.store, '*', Date.now()));
  // Schemathesis writes nothing into the repository: it runs in a directory of its own.
  workDir = await mkdtemp(join(tmpdir(), 'memgate-fuzz-'));
}, 900_000);

afterAll(async () => {
  await server?.close();
  await env?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

function schemathesis(args: string[]): Promise<{ code: number; output: string }> {
  const cli = join(dirname(python), 'schemathesis');
  return new Promise((done) => {
    execFile(
      cli,
      args,
      {
        cwd: workDir,
        timeout: RUN_TIMEOUT_MS,
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, NO_COLOR: '1', SCHEMATHESIS_HOOKS: '' },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        const killed = err?.killed ? `\n(killed after ${RUN_TIMEOUT_MS} ms)` : '';
        done({ code, output: `${stdout}\n${stderr}${killed}` });
      },
    );
  });
}

describe('the HTTP API, fuzzed from its own OpenAPI document', () => {
  it(
    'answers no 5xx, only documented statuses, bodies that match their schemas, and 4xx to what it forbids',
    async () => {
      const { code, output } = await schemathesis([
        'run',
        `${server.url}/openapi.json`,
        '--header',
        `Authorization: Bearer ${key}`,
        '--checks',
        CHECKS.join(','),
        '--phases',
        'examples,coverage,fuzzing',
        '--mode',
        'all',
        '--max-examples',
        String(MAX_EXAMPLES),
        '--seed',
        String(SEED),
        // One worker: Hypothesis parses sources with `ast`, which Python 3.11 cannot do from two
        // threads at once ("AST constructor recursion depth mismatch").
        '--workers',
        '1',
        '--request-timeout',
        '30',
        '--generation-database',
        'none',
        '--no-color',
      ]);
      if (code !== 0) console.error(output);
      expect(code, 'schemathesis found failures (its report is printed above)').toBe(0);
    },
    RUN_TIMEOUT_MS + 30_000,
  );
});
