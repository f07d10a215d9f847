import { describe, expect, it } from 'vitest';
import { uiFiles } from '../../cli/ui';
import { parseConfig } from '../../core/config';

/**
 * The memory browser's page is told the Temporal UI's address and namespace from the
 * configuration: each is put in as written, escaped for its attribute, whatever it holds. A
 * `$'` in one was read as a replacement pattern and pasted the rest of the page in its place.
 */
describe("the memory browser's page", () => {
  it('holds the configured namespace and Temporal UI as written, once each', async () => {
    const files = await uiFiles(
      parseConfig({
        TEMPORAL_ADDRESS: '127.0.0.1:7233',
        TEMPORAL_NAMESPACE: `ns$'&$\`<x>"`,
        MEMGATE_CODEC_ORIGINS: "http://t.example$'",
      }),
    );
    const page = files['index.html'];
    expect(page).toContain(
      `<meta name="memgate:temporal-namespace" content="ns$'&amp;$\`&lt;x&gt;&quot;" />`,
    );
    expect(page).toContain(`<meta name="memgate:temporal-ui" content="http://t.example$'" />`);
    expect(page.match(/<html/g)).toHaveLength(1);
  });
});
