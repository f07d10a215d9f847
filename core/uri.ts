/**
 * URIs as they may be printed or put into an error: the password of their user information
 * masked. The user information ends at the last `@` (a driver reads `user:p@ss@host` so), and a
 * password may hold what a URI otherwise delimits with (`/`, `?`, `#`): everything from the
 * first `:` after `//` to the last `@` is masked. An `@` later in the URI (in a query value)
 * masks more than the password, never less.
 */
export function maskUri(uri: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(uri)?.[0];
  if (scheme === undefined) return uri;
  const rest = uri.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  const colon = rest.indexOf(':');
  // A user without a password (an X.509 subject) is no secret.
  if (at < 0 || colon < 0 || colon > at) return uri;
  return `${scheme}${rest.slice(0, colon)}:***@${rest.slice(at + 1)}`;
}

/** Every URI in a text (a driver's error message) masked; a URI ends at white space or a quote. */
export function maskUris(text: string): string {
  return text.replace(/(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*:\/\/[^\s"'`<>]*/gi, maskUri);
}
