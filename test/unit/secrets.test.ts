import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { temporalConnectionOptions } from '../../stack/connection';
import { maskUri, parseConfig } from '../../core/config';
import { InvalidConfigError } from '../../core/errors';

/** Secrets never reach an error or a printed line; TLS settings come in pairs and from files. */
describe('secrets', () => {
  it('an invalid secret is named, never shown', () => {
    const error = (() => {
      try {
        parseConfig({ MONGODB_URI: 'postgres://admin:hunter2@db.internal/x' });
      } catch (err) {
        return err;
      }
    })();
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect((error as Error).message).toContain('MONGODB_URI');
    expect((error as Error).message).not.toContain('hunter2');
    expect(JSON.stringify((error as InvalidConfigError).details)).not.toContain('hunter2');
  });

  it('a URI prints with its password masked, and unchanged without one', () => {
    expect(maskUri('mongodb+srv://app:s3cr%40t@cluster0.example.net/memgate?tls=true')).toBe(
      'mongodb+srv://app:***@cluster0.example.net/memgate?tls=true',
    );
    expect(maskUri('mongodb://127.0.0.1:27017/')).toBe('mongodb://127.0.0.1:27017/');
  });
});

describe('TLS settings', () => {
  it('a certificate without its key is refused, naming the missing one', () => {
    expect(() => parseConfig({ TEMPORAL_TLS_CERT_FILE: '/x/client.pem' })).toThrow(/TEMPORAL_TLS_KEY_FILE/);
    expect(() => parseConfig({ MEMGATE_HTTP_TLS_KEY_FILE: '/x/key.pem' })).toThrow(
      /MEMGATE_HTTP_TLS_CERT_FILE/,
    );
  });

  it('Temporal connection options read the files; an API key alone means TLS with system roots', () => {
    const dir = mkdtempSync(join(tmpdir(), 'memgate-tls-'));
    for (const f of ['ca.pem', 'crt.pem', 'key.pem']) writeFileSync(join(dir, f), `-----${f}-----`);
    const config = parseConfig({
      TEMPORAL_TLS_CA_FILE: join(dir, 'ca.pem'),
      TEMPORAL_TLS_CERT_FILE: join(dir, 'crt.pem'),
      TEMPORAL_TLS_KEY_FILE: join(dir, 'key.pem'),
      TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
    });
    const options = temporalConnectionOptions(config, 'temporal.internal:7233');
    expect(options.tls).toEqual({
      serverRootCACertificate: Buffer.from('-----ca.pem-----'),
      clientCertPair: { crt: Buffer.from('-----crt.pem-----'), key: Buffer.from('-----key.pem-----') },
      serverNameOverride: 'temporal.internal',
    });
    const cloud = temporalConnectionOptions(parseConfig({ TEMPORAL_API_KEY: 'k' }), 'ns.tmprl.cloud:7233');
    expect(cloud).toEqual({ address: 'ns.tmprl.cloud:7233', tls: true, apiKey: 'k' });
    expect(temporalConnectionOptions(parseConfig({}), '127.0.0.1:7233')).toEqual({
      address: '127.0.0.1:7233',
    });
    expect(() =>
      temporalConnectionOptions(parseConfig({ TEMPORAL_TLS_CA_FILE: join(dir, 'missing.pem') }), 'x:1'),
    ).toThrow(/TEMPORAL_TLS_CA_FILE.*ENOENT/);
  });
});
