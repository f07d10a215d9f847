import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { Config } from '../../core/config';
import { InvalidConfigError } from '../../core/errors';
import { impossibleReport } from '../../store/impossible';
import { requireKey } from '../../server/auth';
import { buildHttpServer, type ServerDeps } from '../../server/http';
import { mountMcp } from '../../server/mcpHttp';
import { OPENAPI_PATH } from '../../server/openapi';
import { mountUi, UI_PATH } from '../../server/ui';
import { uiFiles } from '../ui';
import { MemgateClient } from '../../client/client';
import { WindowClient } from '../../client/window';
import { config, resolveEndpoints } from './context';

/** What the HTTP API answers from: this client, its windows, and its two servers to probe. */
export function serverDeps(client: MemgateClient, c: Config): ServerDeps {
  return {
    memgate: client,
    windows: new WindowClient(client.temporal, c),
    impossible: (request) => impossibleReport(client.store, request),
    probes: {
      temporal: () => client.temporal.workflowService.getSystemInfo({}),
      store: () => client.store.answers(),
    },
    streamStallMs: c.storeTimeoutMs / 2,
  };
}

/**
 * Each answered request into the process's Prometheus endpoint (MEMGATE_METRICS_PORT): how
 * long each operation took, by status class. Operations and classes are few, so the label
 * set stays bounded (no agent or session id is ever a label).
 */
async function answeredMetrics(
  c: Config,
): Promise<(answered: { operation: string; status: number; ms: number }) => void> {
  // Loaded here, not at the top: the worker runtime is the heaviest module memgate has, and
  // every other command starts faster without it.
  const [{ installRuntime }, { Runtime }] = await Promise.all([
    import('../../worker/worker'),
    import('@temporalio/worker'),
  ]);
  installRuntime(c);
  const meter = Runtime.instance().metricMeter;
  const duration = meter.createHistogram(
    'memgate_http_request_duration',
    'float',
    'ms',
    'time to answer an HTTP API request, by operation and status class',
  );
  return ({ operation, status, ms }) =>
    duration.record(ms, { operation, status: `${Math.floor(status / 100)}xx` });
}

/** The HTTP API's certificate and key when MEMGATE_HTTP_TLS_* name them (config checks they pair). */
function httpsOptions(c: Config): { cert: Buffer; key: Buffer } | undefined {
  if (!c.httpTlsCertFile || !c.httpTlsKeyFile) return undefined;
  const read = (variable: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new InvalidConfigError(
        variable,
        `a PEM file that can be read (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`,
        path,
      );
    }
  };
  return {
    cert: read('MEMGATE_HTTP_TLS_CERT_FILE', c.httpTlsCertFile),
    key: read('MEMGATE_HTTP_TLS_KEY_FILE', c.httpTlsKeyFile),
  };
}

export interface RunningServer {
  /** `http://host:port` it listens on. */
  url: string;
  close(): Promise<void>;
}

/** The HTTP API on `MEMGATE_HTTP_HOST`:`MEMGATE_HTTP_PORT` (or the port given; 0 picks one). */
export async function startHttpServer(
  client: MemgateClient,
  c: Config,
  listen: { port?: number } = {},
): Promise<RunningServer> {
  const https = httpsOptions(c);
  const deps = serverDeps(client, c);
  const app = buildHttpServer(deps, {
    ...(https && { https }),
    // Every operation needs a live API key covering what it names (`memgate keys create`).
    authenticate: requireKey((key) => client.authenticate(key)),
    onServerError: (err, request, errorId) =>
      console.error(`${request.method} ${request.url} failed${errorId ? ` (error ${errorId})` : ''}:`, err),
    onAnswered: await answeredMetrics(c),
    rateLimitPerMinute: c.httpRateLimit,
    inFlightPerCaller: { running: c.httpInFlightPerKey, queued: c.httpQueuedPerKey },
    requestTimeoutMs: c.httpRequestTimeoutMs,
    codecOrigins: [
      `http://127.0.0.1:${c.temporalUiPort}`,
      `http://localhost:${c.temporalUiPort}`,
      ...(c.codecOrigins ?? []),
    ],
  });
  // The memory browser at /ui/, reading through the routes above (docs/browser.md).
  mountUi(app, await uiFiles(c));
  // The MCP server over Streamable HTTP at /mcp, under the same keys.
  mountMcp(app, {
    ...deps,
    authenticate: (key) => client.authenticate(key),
    onServerError: (err, errorId) =>
      console.error(`MCP call failed${errorId ? ` (error ${errorId})` : ''}:`, err),
  });
  const host = c.httpHost;
  try {
    await app.listen({ host, port: listen.port ?? c.httpPort });
  } catch (err) {
    await app.close();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES') {
      throw new InvalidConfigError(
        'MEMGATE_HTTP_PORT',
        'a port this process may listen on and no other does',
        c.httpPort,
      );
    }
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
      throw new InvalidConfigError('MEMGATE_HTTP_HOST', 'a host name or IP address of this machine', host);
    }
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : c.httpPort;
  const scheme = https ? 'https' : 'http';
  return { url: `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`, close: () => app.close() };
}

export function announce(server: RunningServer): string {
  return `memgate HTTP API on ${server.url} (OpenAPI at ${OPENAPI_PATH}, the memory browser at ${server.url}${UI_PATH}/)`;
}

function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve(signal);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

export function registerServeCommands(program: Command): void {
  program
    .command('serve')
    .description(
      'serve the HTTP API (MEMGATE_HTTP_HOST:MEMGATE_HTTP_PORT, OpenAPI at /openapi.json) against the configured servers or a running local stack; writes need a worker (`npm start` runs both)',
    )
    .action(async () => {
      const c = config();
      const client = await MemgateClient.connect(c, await resolveEndpoints());
      try {
        const server = await startHttpServer(client, c);
        console.log(announce(server));
        await untilSignal();
        await server.close();
      } finally {
        await client.close();
      }
    });
}
