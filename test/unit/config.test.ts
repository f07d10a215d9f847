import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_SPECS, parseConfig } from '../../core/config';
import { EvictionBoundaryError, InvalidConfigError } from '../../core/errors';
import { thrownBy } from '../support/thrown';
import { CONFIGURATION_DOC, configTable, documentedTable, normaliseTable } from '../../scripts/config-docs';

describe('configuration', () => {
  it('has defaults that run on a laptop', () => {
    const c = parseConfig({});
    expect(c.temporalAddress).toBeUndefined();
    expect(c.mongoUri).toBeUndefined();
    expect(c.gateThreshold).toBe(0.15);
    expect(c.halfLifeHours).toBe(72);
    expect(c.reclaimFloor).toBeLessThan(c.gateThreshold);
  });

  it('rejects reclaimFloor >= gateThreshold with EvictionBoundaryError (docs/invariants.md, Eviction boundary)', () => {
    expect(() => parseConfig({ MEMGATE_RECLAIM_FLOOR: '0.15', MEMGATE_GATE_THRESHOLD: '0.15' })).toThrow(
      EvictionBoundaryError,
    );
    expect(() => parseConfig({ MEMGATE_RECLAIM_FLOOR: '0.5' })).toThrow(EvictionBoundaryError);
    expect(() => parseConfig({ MEMGATE_RECLAIM_FLOOR: '0.149' })).not.toThrow();
  });

  it.each([
    ['MEMGATE_GATE_THRESHOLD', 'abc'],
    ['MEMGATE_GATE_THRESHOLD', '1.5'],
    ['MEMGATE_HALF_LIFE_HOURS', '-3'],
    // In milliseconds this overflows to Infinity: nothing would ever decay.
    ['MEMGATE_HALF_LIFE_HOURS', '1e306'],
    ['MEMGATE_HOT_CAPACITY', '1e300'],
    ['MEMGATE_HIGH_WATERMARK', '1e308'],
    ['MEMGATE_TEMPORAL_PORT', '70000'],
    ['MEMGATE_MAX_ENTRIES_PER_WRITE', '2.5'],
    ['MONGODB_URI', 'http://localhost'],
    ['MEMGATE_NIGHTLY_AT', '25:00'],
    ['MEMGATE_NIGHTLY_TZ', 'Mars/Olympus'],
    ['MEMGATE_EVICT_LOSSY_SUBSUMED', 'yes'],
    // A deployment version is `<task queue>.<build id>`: a dot would make it ambiguous.
    ['MEMGATE_WORKER_BUILD_ID', 'release.1'],
    // Past the window's ceiling its state could outgrow what continue-as-new carries.
    ['MEMGATE_WINDOW_TOKENS', '2000001'],
    ['MEMGATE_EMBEDDINGS_URL', 'http://a/v1,not a url'],
    ['MEMGATE_EMBEDDINGS_URL', 'http://a/v1, http://a/v1'],
    ['MEMGATE_EMBEDDINGS_QUERY_SERVERS', '9'],
  ])('names the variable %s=%s and what is allowed', (variable, value) => {
    try {
      parseConfig({ [variable]: value });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidConfigError);
      expect((err as InvalidConfigError).variable).toBe(variable);
      expect((err as InvalidConfigError).message).toContain(variable);
    }
  });

  it("spreads queries over one endpoint or several, and keeps the passage server off the query servers' ports", () => {
    expect(parseConfig({}).embeddingsUrls).toBeUndefined();
    expect(parseConfig({ MEMGATE_EMBEDDINGS_URL: 'http://a/v1' }).embeddingsUrls).toEqual(['http://a/v1']);
    expect(parseConfig({ MEMGATE_EMBEDDINGS_URL: 'http://a/v1, http://b/v1' }).embeddingsUrls).toEqual([
      'http://a/v1',
      'http://b/v1',
    ]);
    const passagesOn = (port: string, servers: string) =>
      parseConfig({
        MEMGATE_EMBEDDINGS_PORT: '9000',
        MEMGATE_EMBEDDINGS_QUERY_SERVERS: servers,
        MEMGATE_EMBEDDINGS_PASSAGES_PORT: port,
      });
    expect(() => passagesOn('9002', '3')).toThrow(
      expect.objectContaining({ type: 'InvalidConfig', variable: 'MEMGATE_EMBEDDINGS_PASSAGES_PORT' }),
    );
    expect(() => passagesOn('9003', '3')).not.toThrow();
    expect(() => passagesOn('8999', '3')).not.toThrow();
    expect(() =>
      parseConfig({ MEMGATE_EMBEDDINGS_PORT: '65535', MEMGATE_EMBEDDINGS_QUERY_SERVERS: '2' }),
    ).toThrow(expect.objectContaining({ variable: 'MEMGATE_EMBEDDINGS_QUERY_SERVERS' }));
  });

  // Ignored without a word, it would leave its owner believing a floor still applies.
  it('refuses the retired MEMGATE_SEMANTIC_MIN_SIMILARITY, saying what replaced it', () => {
    expect(() => parseConfig({ MEMGATE_SEMANTIC_MIN_SIMILARITY: '0.81' })).toThrow(
      expect.objectContaining({
        type: 'InvalidConfig',
        variable: 'MEMGATE_SEMANTIC_MIN_SIMILARITY',
        message: expect.stringContaining('background'),
      }),
    );
    expect(() => parseConfig({ MEMGATE_SEMANTIC_MIN_SIMILARITY: '' })).not.toThrow();
  });

  it('bounds every millisecond setting by what a timer holds: Node fires a longer one after 1 ms', () => {
    const timed = Object.values(CONFIG_SPECS).filter((s) => s.env.endsWith('_MS'));
    expect(timed.length).toBeGreaterThan(3);
    for (const { env } of timed) {
      const err = (() => {
        try {
          parseConfig({ [env]: '2147483648' });
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err, env).toBeInstanceOf(InvalidConfigError);
      expect((err as InvalidConfigError).variable).toBe(env);
    }
    const longest = parseConfig({
      MEMGATE_OPENAI_TIMEOUT_MS: '2147483647',
      MEMGATE_WRITE_TIMEOUT_MS: '2147483647',
    });
    expect([longest.openaiTimeoutMs, longest.writeTimeoutMs]).toEqual([2_147_483_647, 2_147_483_647]);
  });

  it('names an invalid URL with the password of its user information masked', () => {
    for (const [variable, value] of [
      ['MEMGATE_EMBEDDINGS_URL', 'https://user:s3cret@h1/v1,https://user:s3cret@h1/v1'],
      ['MEMGATE_EMBEDDINGS_PASSAGES_URL', 'https://user:s3cret@h1:99999/v1'],
      ['OPENAI_BASE_URL', 'https://user:s3cret@h1:99999/v1'],
    ] as const) {
      const err = thrownBy(() => parseConfig({ [variable]: value }), InvalidConfigError);
      expect(err.variable).toBe(variable);
      expect(err.message).toContain('https://user:***@');
      expect(JSON.stringify(err)).not.toContain('s3cret');
    }
  });

  it('every variable has a description for docs/configuration.md', () => {
    for (const s of Object.values(CONFIG_SPECS)) expect(s.doc.length).toBeGreaterThan(5);
  });
});

describe('docs/configuration.md', () => {
  it('documents every configuration variable with its default (regenerate with scripts/config-docs.ts)', () => {
    const page = readFileSync(CONFIGURATION_DOC, 'utf8');
    expect(normaliseTable(documentedTable(page) ?? '')).toBe(normaliseTable(configTable()));
  });
});
