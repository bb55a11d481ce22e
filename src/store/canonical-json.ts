/**
 * The one text a value signs as, for the store's MACs (session records,
 * node load reports).
 */

/**
 * JSON with object keys sorted at every level and undefined members left
 * out, so a record signs the same before and after a JSON round trip (Redis)
 * or a structured clone (memory). Built as text, never as objects, so a key
 * such as `__proto__` is just a key.
 */
export function canonicalJson (value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) return `[${value.map((v) => v === undefined ? 'null' : canonicalJson(v)).join(',')}]`
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
  return `{${entries.join(',')}}`
}
