import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';

/** The memory browser's page and its bundle (cli/ui.ts builds them). */
export interface UiFiles {
  'index.html': string;
  'app.js': string;
  'app.css': string;
}

const TYPES: Record<keyof UiFiles, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

/** Where the page is served. */
export const UI_PATH = '/ui';

/**
 * The memory browser at `/ui/` (docs/browser.md): the page and its bundle, served from this
 * process under a Content-Security-Policy that lets it load nothing but its own files and
 * call nothing but this server. It reads through the HTTP API with the key the operator
 * enters, so serving it needs none.
 */
export function mountUi(app: FastifyInstance, files: UiFiles): void {
  void app.register(async (ui) => {
    await ui.register(helmet, {
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: ["'none'"],
          scriptSrc: ["'self'"],
          styleSrc: ["'self'"],
          imgSrc: ["'self'", 'data:'],
          connectSrc: ["'self'"],
          baseUri: ["'none'"],
          formAction: ["'none'"],
          frameAncestors: ["'none'"],
        },
      },
    });
    ui.get(UI_PATH, { config: { operationId: 'ui' } }, (_, reply) => reply.redirect(`${UI_PATH}/`));
    for (const name of Object.keys(TYPES) as (keyof UiFiles)[]) {
      ui.get(
        name === 'index.html' ? `${UI_PATH}/` : `${UI_PATH}/${name}`,
        { config: { operationId: 'ui' } },
        // Names without a digest: the browser asks again whether each changed.
        (_, reply) => reply.type(TYPES[name]).header('cache-control', 'no-cache').send(files[name]),
      );
    }
  });
}
