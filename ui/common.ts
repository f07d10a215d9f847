import { html } from 'htm/preact';
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api';

/** What a page loads: its data, or why it has none yet. */
export type Loaded<T> =
  { state: 'loading' } | { state: 'failed'; error: ApiError } | { state: 'done'; data: T };

/** Loads `load()` whenever `deps` change; `reload` loads it again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> & { reload: () => void } {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    setLoaded({ state: 'loading' });
    load().then(
      (data) => current && setLoaded({ state: 'done', data }),
      (error: unknown) => current && setLoaded({ state: 'failed', error: asApiError(error) }),
    );
    return () => {
      current = false;
    };
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...loaded, reload };
}

export function asApiError(error: unknown): ApiError {
  return error instanceof ApiError
    ? error
    : new ApiError(0, 'Internal', error instanceof Error ? error.message : String(error));
}

/** The location after `#`: the page and its parameters. */
export function useRoute(): { path: string[]; params: URLSearchParams } {
  const read = () => {
    const [path = '', search = ''] = location.hash.replace(/^#\/?/, '').split('?');
    return {
      path: path.split('/').filter(Boolean).map(decodeURIComponent),
      params: new URLSearchParams(search),
    };
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const changed = () => setRoute(read());
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}

export function href(...parts: (string | undefined)[]): string {
  return `#/${parts
    .filter((p): p is string => p !== undefined)
    .map(encodeURIComponent)
    .join('/')}`;
}

/** An error as the operator reads it: what happened and what to do, never a stack. */
export function Failure({ error }: { error: ApiError }) {
  const title =
    error.status === 401
      ? 'This key is not accepted'
      : error.status === 403
        ? 'Forbidden (403)'
        : error.status === 404
          ? 'Not found (404)'
          : error.status === 0
            ? 'No answer'
            : `${error.type} (${error.status})`;
  const advice =
    error.status === 401
      ? 'It is wrong, revoked or missing: enter a live key (from memgate keys create).'
      : error.status === 403
        ? 'The key does not cover this: ask for a key whose pattern covers it.'
        : undefined;
  return html`<div class="failure" role="alert" data-status=${error.status}>
    <strong>${title}</strong>
    <p>${error.message}</p>
    ${advice && html`<p>${advice}</p>`}
  </div>`;
}

/** A page's data once loaded, its failure, or that it is loading. */
export function Show<T>({
  loaded,
  children,
}: {
  loaded: Loaded<T>;
  children: (data: T) => ComponentChildren;
}) {
  if (loaded.state === 'loading') return html`<p class="loading">Loading…</p>`;
  if (loaded.state === 'failed') return html`<${Failure} error=${loaded.error} />`;
  return html`${children(loaded.data)}`;
}

export const time = (at: number | undefined) =>
  at === undefined ? '–' : new Date(at).toISOString().replace('T', ' ').slice(0, 19);
export const number = (n: number) => n.toLocaleString('en');
export const seconds = (ms: number | undefined) => (ms === undefined ? '–' : `${(ms / 1000).toFixed(1)} s`);
