import { openSync, readSync, closeSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../core/config';
import { temporalDbPath } from '../../stack/stack';

/** The settings of the test stack, which the global setup started from the same environment. */
const config = parseConfig(process.env);

/** The first 100 bytes of an SQLite file: its header (sqlite.org/fileformat.html). */
function sqliteHeader(path: string): Buffer {
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(100);
    readSync(fd, header, 0, 100, 0);
    return header;
  } finally {
    closeSync(fd);
  }
}

describe("the stack's Temporal dev server", () => {
  it.skipIf(config.temporalAddress !== undefined)(
    'keeps its state in SQLite with a write-ahead log, not a journal made and deleted at every commit',
    () => {
      const header = sqliteHeader(temporalDbPath(config));
      expect(header.subarray(0, 16).toString('latin1')).toBe('SQLite format 3\0');
      // The file format's write and read versions: 1 for a rollback journal, 2 for a write-ahead log.
      expect([header[18], header[19]]).toEqual([2, 2]);
    },
  );
});
