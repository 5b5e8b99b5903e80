/** The dashboard's API, from the page: the cookie set on the first visit authenticates every call. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

export async function get<T>(path: string): Promise<T> {
  return answer<T>(await fetch(`/api${path}`, { credentials: "same-origin" }));
}

export async function post<T>(path: string, body: unknown): Promise<T> {
  return answer<T>(
    await fetch(`/api${path}`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    }),
  );
}

async function answer<T>(response: Response): Promise<T> {
  const body = (await response.json().catch(() => ({}))) as { error?: string };
  if (!response.ok) throw new ApiError(body.error ?? `${response.status} ${response.statusText}`, response.status);
  return body as T;
}

/** Who the page acts as: the header's field, kept in this browser. */
export function actor(): string {
  return (document.getElementById("actor") as HTMLInputElement | null)?.value.trim() ?? "";
}
