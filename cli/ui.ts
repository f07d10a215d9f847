import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../core/config';
import type { UiFiles } from '../server/ui';

/**
 * The memory browser's bundle (docs/browser.md): ui/main.ts and what it imports (Preact, htm,
 * uPlot and their stylesheets) as one script and one stylesheet, by esbuild. `npm run build`
 * writes it beside the compiled code (dist/ui/); run from its sources, `memgate serve` bundles
 * it as it starts, so what it serves is always what the sources say.
 */

/** The repository: two levels up from dist/cli/, one from cli/. */
const ROOT = resolve(__dirname, ...(__filename.endsWith('.js') ? ['..', '..'] : ['..']));
const BUILT = join(ROOT, 'dist', 'ui');

async function bundle(): Promise<UiFiles> {
  // Only where the bundle is made: the compiled CLI serves the one `npm run build` wrote.
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: { app: join(ROOT, 'ui', 'main.ts') },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    outdir: BUILT,
    write: false,
    logLevel: 'silent',
  });
  const output = (ext: string) => {
    const file = result.outputFiles.find((f) => f.path.endsWith(ext));
    if (!file) throw new Error(`the memory browser's bundle has no ${ext}`);
    return file.text;
  };
  return {
    'index.html': readFileSync(join(ROOT, 'ui', 'index.html'), 'utf8'),
    'app.js': output('.js'),
    'app.css': output('.css'),
  };
}

/** `npm run build`: the bundle into dist/ui/. */
export async function writeUi(): Promise<void> {
  const files = await bundle();
  mkdirSync(BUILT, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(BUILT, name), text);
}

const escape = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * The page as this server serves it: the built bundle (or, from the sources, one made now),
 * its page told where the Temporal UI is, for the links to each night's run: the local
 * stack's, or with configured servers the first Temporal UI allowed to call the codec.
 */
export async function uiFiles(c: Config): Promise<UiFiles> {
  const files = __filename.endsWith('.js')
    ? {
        'index.html': readFileSync(join(BUILT, 'index.html'), 'utf8'),
        'app.js': readFileSync(join(BUILT, 'app.js'), 'utf8'),
        'app.css': readFileSync(join(BUILT, 'app.css'), 'utf8'),
      }
    : await bundle();
  const temporalUi = c.temporalAddress ? (c.codecOrigins?.[0] ?? '') : `http://127.0.0.1:${c.temporalUiPort}`;
  return {
    ...files,
    'index.html': files['index.html']
      // Replaced by a function, so a `$'` or `$&` in a value is text, not a replacement pattern.
      .replace('{{temporalUi}}', () => escape(temporalUi))
      .replace('{{temporalNamespace}}', () => escape(c.temporalNamespace)),
  };
}
