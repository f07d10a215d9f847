import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemgateClient } from '../../client/client';
import { startHttpServer, type RunningServer } from '../../cli/commands/serve';
import { StackUnavailableError } from '../../core/errors';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * Secure connections with real certificates (made here with openssl): the HTTP API serves
 * TLS, and a client set up for Temporal TLS really speaks it (the local dev server does not,
 * so the handshake fails, typed).
 */
let env: TestEnv;
let dir: string;
let server: RunningServer;

beforeAll(async () => {
  env = await startTestEnv();
  dir = mkdtempSync(join(tmpdir(), 'memgate-tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  server = await startHttpServer(
    env.client,
    { ...env.config, httpTlsCertFile: join(dir, 'cert.pem'), httpTlsKeyFile: join(dir, 'key.pem') },
    { port: 0 },
  );
});
afterAll(async () => {
  await server?.close();
  await env?.close();
});

function get(url: string, ca?: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('TLS', () => {
  it('the HTTP API serves TLS with the configured certificate, and only TLS', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const ok = await get(`${server.url}/healthz`, readFileSync(join(dir, 'cert.pem')));
    expect(ok).toEqual({ status: 200, body: '{"status":"ok"}' });
    // Without trusting the certificate, the client refuses the connection.
    await expect(get(`${server.url}/healthz`)).rejects.toThrow(/self[- ]signed/i);
    await expect(fetch(server.url.replace('https:', 'http:') + '/healthz')).rejects.toThrow();
  });

  it('a client set up for Temporal TLS speaks TLS: against a plaintext server it fails, typed', async () => {
    const failure = await MemgateClient.connect(
      { ...env.config, temporalTlsCaFile: join(dir, 'cert.pem') },
      env.endpoints,
    ).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(StackUnavailableError);
    expect((failure as Error).message).toContain(env.endpoints.temporalAddress);
  });
});
