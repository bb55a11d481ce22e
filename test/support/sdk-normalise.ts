/**
 * What two runs of the same conformance case (CLI spawned directly, or via
 * claude-remote → gateway) must agree on: the messages query() yields with
 * what necessarily differs between runs taken out. Ids and uuids become
 * ordinal placeholders (`<uuid:1>`, `<toolu:2>`: the same id keeps the same
 * name, so links between messages still count), timing, cost and usage
 * fields (and the CLI's pid-named socket path) are dropped, and known folders become placeholders. Everything else
 * (types, subtypes, order, texts, tool names and inputs, results, errors)
 * must be equal.
 */

/** Keys whose values depend on time, money or load, not on the conversation. */
const DROPPED_KEYS = new Set([
  'timestamp', 'duration_ms', 'duration_api_ms', 'total_cost_usd', 'costUSD', 'usage', 'modelUsage',
  'request_id', 'fast_mode_state', 'memory_paths',
  // names a socket after the CLI's pid
  'messaging_socket_path'
])
/** Timing fields: `…_ms`, `…Ms`. */
const TIMING_KEY = /(_ms|Ms)$/

const ID_PATTERNS: Array<[RegExp, string]> = [
  [/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, 'uuid'],
  [/\btoolu_[0-9A-Za-z]{16,}/g, 'toolu'],
  [/\bmsg_[0-9A-Za-z]{16,}/g, 'msg'],
  [/\breq_[0-9A-Za-z]{16,}/g, 'req']
]

export function normaliseMessages (messages: unknown[], paths: Record<string, string> = {}): unknown[] {
  const names = new Map<string, string>()
  const counters = new Map<string, number>()
  // Longest first, so a folder inside another is replaced before its parent.
  const folders = Object.entries(paths).sort((a, b) => b[0].length - a[0].length)
  const str = (s: string): string => {
    let out = s
    for (const [folder, name] of folders) out = out.split(folder).join(name)
    for (const [re, kind] of ID_PATTERNS) {
      out = out.replace(re, (id) => {
        let name = names.get(id)
        if (name === undefined) {
          const n = (counters.get(kind) ?? 0) + 1
          counters.set(kind, n)
          name = `<${kind}:${n}>`
          names.set(id, name)
        }
        return name
      })
    }
    return out
  }
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return str(v)
    if (Array.isArray(v)) return v.map(walk)
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {}
      for (const key of Object.keys(v).sort()) {
        if (DROPPED_KEYS.has(key) || TIMING_KEY.test(key)) continue
        out[key] = walk((v as Record<string, unknown>)[key])
      }
      return out
    }
    return v
  }
  return messages.map(walk)
}

/** One line per message (`type/subtype`), for failure messages. */
export function outline (messages: unknown[]): string {
  return messages.map((m) => {
    const r = m as { type?: string, subtype?: string }
    return r.subtype === undefined ? String(r.type) : `${String(r.type)}/${r.subtype}`
  }).join(' ')
}
