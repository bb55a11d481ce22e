/** See build-console.mjs. */
export function buildConsole (options?: { root?: string, outDir?: string, minify?: boolean }): Promise<{ outDir: string, files: string[] }>
