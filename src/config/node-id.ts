/**
 * This process's default name among gateways sharing a store (NODE_ID
 * unset). Apart from the settings because the cluster code also derives it,
 * to recognise its own node's earlier processes.
 */
import { hostname } from 'node:os'

/** `<hostname>-<pid>`, in NODE_ID's charset and length (a hostname may hold other characters or be long). */
export function defaultNodeId (pidNumber = process.pid): string {
  const pid = `-${pidNumber}`
  const host = hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64 - pid.length)
  return `${host === '' ? 'node' : host}${pid}`
}
