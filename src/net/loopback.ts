/**
 * Whether a HOST setting (or a host name) means this machine only: every
 * address of 127.0.0.0/8, `::1` (also written out in full or as an
 * IPv4-mapped loopback), and `localhost`. One helper so the Host guard, the
 * start-up checks and the sandbox policy agree: `HOST=127.0.0.2` is loopback
 * too and must not switch the DNS-rebinding guard off.
 */
import { isIP } from 'node:net'

export function isLoopback (host: string): boolean {
  let h = host.trim().toLowerCase()
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1)
  if (h === 'localhost') return true
  const family = isIP(h)
  if (family === 4) return h.startsWith('127.')
  if (family !== 6) return false
  const mapped = /^(?:0{0,4}:){0,5}(?::|0{0,4}:)?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h)
  if (mapped !== null) return (mapped[1] as string).startsWith('127.')
  return expandV6(h) === '0000:0000:0000:0000:0000:0000:0000:0001'
}

/** Eight four-digit groups, for comparing IPv6 spellings (`::1`, `0:0:0:0:0:0:0:1`). */
function expandV6 (address: string): string {
  const [head = '', tail] = address.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const middle = tail === undefined ? [] : Array.from({ length: 8 - left.length - right.length }, () => '0')
  return [...left, ...middle, ...right].map((g) => g.padStart(4, '0')).join(':')
}
