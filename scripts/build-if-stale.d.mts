/** See build-if-stale.mjs. */
export function staleSource (root: string): string | null
