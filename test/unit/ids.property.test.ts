import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Provenance } from '../../core/entry';
import { entryId, summaryId } from '../../core/ids';
import { base64url, sha256 } from '../../core/sha256';

/**
 * core/ids.ts derives the ids the store has always written, in plain TypeScript: each must
 * equal the node:crypto digest the store computed before, or a retried write of a stored
 * entry would land on a new document.
 */
const text = fc.string({ unit: 'binary', maxLength: 300 });

describe('the pure ids', () => {
  it('sha256 and base64url are node:crypto’s, across block boundaries and all of Unicode', () => {
    fc.assert(
      fc.property(text, (s) => {
        const digest = createHash('sha256').update(s).digest();
        expect(base64url(sha256(s))).toBe(digest.toString('base64url'));
        for (let n = 0; n <= 4; n++)
          expect(base64url(digest.subarray(0, n))).toBe(digest.subarray(0, n).toString('base64url'));
      }),
    );
    for (const length of [55, 56, 63, 64, 65, 119, 120]) {
      const s = 'x'.repeat(length);
      expect(base64url(sha256(s))).toBe(createHash('sha256').update(s).digest('base64url'));
    }
  });

  it('entryId is the digest the store wrote, by idempotency key or by content', () => {
    fc.assert(
      fc.property(text, text, text, fc.integer({ min: 0 }), (agentId, key, content, writtenAt) => {
        const byKey = createHash('sha256').update(agentId).update('\0').update('key\0').update(key);
        expect(entryId(agentId, { idempotencyKey: key })).toBe(byKey.digest('base64url').slice(0, 32));
        const source: Provenance = { origin: 'user', ref: key };
        const byContent = createHash('sha256')
          .update(agentId)
          .update('\0')
          .update('content\0')
          .update(content)
          .update('\0')
          .update(JSON.stringify(source))
          .update('\0')
          .update(String(writtenAt));
        expect(entryId(agentId, { text: content, source, writtenAt })).toBe(
          byContent.digest('base64url').slice(0, 32),
        );
      }),
    );
  });

  it('summaryId is the digest the store wrote, whatever the order of the sources', () => {
    fc.assert(
      fc.property(text, fc.array(text, { maxLength: 6 }), (agentId, sourceIds) => {
        const h = createHash('sha256').update(agentId).update('\0summary\0');
        for (const id of [...sourceIds].sort()) h.update(id).update('\0');
        expect(summaryId(agentId, [...sourceIds].reverse())).toBe(h.digest('base64url').slice(0, 32));
      }),
    );
  });
});
