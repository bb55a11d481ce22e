/** See build-if-stale.mjs. */
export function staleSource (root: string): string | null
/** See build-if-stale.mjs: the web console's counterpart (dist/console/index.html against src/console and src/client). */
export function staleConsoleSource (root: string): string | null
