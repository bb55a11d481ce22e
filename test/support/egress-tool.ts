/**
 * A sandboxed tool's side of an egress proxy in tests that build the proxy
 * itself: a raw connection to its Unix socket, as socat inside the sandbox
 * makes one, so the bytes written and read are exactly the tool's.
 */
import { once } from 'node:events'
import net from 'node:net'

/** Connects to the proxy listening on `socketPath`; errors are left to the test's reads. */
export async function toolConnection (socketPath: string): Promise<net.Socket> {
  const s = net.connect({ path: socketPath })
  s.on('error', () => {})
  await once(s, 'connect')
  return s
}
