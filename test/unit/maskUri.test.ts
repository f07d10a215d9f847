import { describe, expect, it } from 'vitest';
import { maskUri, maskUris } from '../../core/uri';

/** A URI is printed, or put into an error, with its password masked, whatever the password holds. */
describe('maskUri', () => {
  it.each([
    ['mongodb://admin:hunter2@db.internal:27017/', 'mongodb://admin:***@db.internal:27017/'],
    ['mongodb://admin:hun@ter2@127.0.0.1:1/', 'mongodb://admin:***@127.0.0.1:1/'],
    ['mongodb://admin:hun/ter2@127.0.0.1:1/', 'mongodb://admin:***@127.0.0.1:1/'],
    ['mongodb://admin:hunter2@', 'mongodb://admin:***@'],
    [
      'mongodb+srv://app:s3cr%40t@cluster0.example.net/memgate?tls=true',
      'mongodb+srv://app:***@cluster0.example.net/memgate?tls=true',
    ],
  ])('masks the password of %s', (uri, masked) => {
    expect(maskUri(uri)).toBe(masked);
  });

  it.each([
    'mongodb://127.0.0.1:27017/',
    'mongodb://CN=client,O=memgate@db.internal/?authMechanism=MONGODB-X509',
    'not a uri',
  ])('leaves %s as it is: no password in it', (uri) => {
    expect(maskUri(uri)).toBe(uri);
  });
});

describe('maskUris', () => {
  it('masks every URI in a message', () => {
    expect(
      maskUris(
        'Protocol and host list are required in "mongodb://admin:hunter2@"; tried mongodb://u:p@h/ too',
      ),
    ).toBe('Protocol and host list are required in "mongodb://admin:***@"; tried mongodb://u:***@h/ too');
  });
});
