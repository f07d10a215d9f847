import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../core/config';
import { InvalidConfigError, MemgateError, StackUnavailableError } from '../../core/errors';
import { openStore } from '../../store/db';
import { storeLimitsOf } from '../../store/guard';

/**
 * A store that cannot be opened is reported typed, and what is printed of it (the CLI prints a
 * MemgateError's message) never holds the URI's password, whatever the password holds.
 */
const limits = storeLimitsOf(parseConfig({ MEMGATE_STORE_TIMEOUT_MS: '1000' }));

async function failure(uri: string): Promise<unknown> {
  try {
    const store = await openStore(uri, 'memgate_uri_test', limits);
    await store.close();
  } catch (err) {
    return err;
  }
  throw new Error(`${uri} opened`);
}

describe('a store that cannot be opened', () => {
  it.each([
    ['unreachable', 'mongodb://admin:hunter2@127.0.0.1:1/', StackUnavailableError],
    [
      'unreachable, with an @ in the password',
      'mongodb://admin:hun@ter2@127.0.0.1:1/',
      StackUnavailableError,
    ],
    ['a URI the driver refuses', 'mongodb://admin:hunter2@', InvalidConfigError],
    [
      'a URI the driver refuses, with a / in the password',
      'mongodb://admin:hun/ter2@127.0.0.1:1/',
      InvalidConfigError,
    ],
  ])(
    '%s: typed, and the password shown nowhere',
    async (_, uri, type) => {
      const err = await failure(uri);
      expect(err).toBeInstanceOf(type);
      const { message, details } = err as MemgateError;
      expect(message).toContain('***');
      expect(`${message} ${JSON.stringify(details)}`).not.toMatch(/hunter2|ter2/);
    },
    60_000,
  );
});
