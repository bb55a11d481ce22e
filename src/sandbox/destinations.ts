/**
 * Where a sandboxed CLI may connect (through the egress proxy): `host:port`
 * pairs from SANDBOX_EGRESS, or by default the host of the CLI's
 * ANTHROPIC_BASE_URL, else the Anthropic API. Exact matches only: no
 * wildcards, no name resolution, so the list means what it says.
 */

export interface Destination {
  /** Lower case; IPv6 without brackets. */
  host: string
  port: number
}

export const ANTHROPIC_API: Destination = { host: 'api.anthropic.com', port: 443 }

/** `host[:port]` (port 443 when omitted; IPv6 as `[::1]:8080`); null when not valid. */
export function parseDestination (text: string, defaultPort = 443): Destination | null {
  const t = text.trim().toLowerCase()
  const m = /^(?:\[([0-9a-f:.]+)\]|([a-z0-9.-]+))(?::(\d{1,5}))?$/.exec(t)
  if (m === null) return null
  const host = (m[1] ?? m[2]) as string
  const port = m[3] === undefined ? defaultPort : Number(m[3])
  if (port < 1 || port > 65535 || host === '' || host.startsWith('.') || host.endsWith('.')) return null
  return { host, port }
}

/** SANDBOX_EGRESS: comma-separated `host[:port]`; throws naming the bad entry. */
export function parseDestinations (text: string): Destination[] {
  const out: Destination[] = []
  for (const entry of text.split(',').map((e) => e.trim()).filter((e) => e !== '')) {
    const d = parseDestination(entry)
    if (d === null) throw new Error(`"${entry}" is not host[:port]`)
    out.push(d)
  }
  return out
}

/** The default allowlist: the host:port of ANTHROPIC_BASE_URL in the CLI's environment, else api.anthropic.com:443. */
export function defaultDestinations (cliEnv: NodeJS.ProcessEnv): Destination[] {
  const base = cliEnv.ANTHROPIC_BASE_URL
  if (base === undefined || base === '') return [ANTHROPIC_API]
  try {
    const url = new URL(base)
    const port = url.port === '' ? (url.protocol === 'http:' ? 80 : 443) : Number(url.port)
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase()
    return [{ host, port }]
  } catch {
    return [ANTHROPIC_API]
  }
}

export function destinationText (d: Destination): string {
  return d.host.includes(':') ? `[${d.host}]:${d.port}` : `${d.host}:${d.port}`
}
