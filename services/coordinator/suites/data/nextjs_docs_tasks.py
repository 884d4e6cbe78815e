"""Coding tasks for the `nextjs-docs` suite (seed 004), written for memrig in the style of Vercel's Next.js agent
evals (vercel/next-evals-oss: one PROMPT.md per task, an EVAL.ts checking the code; e.g. agent-037-updatetag-cache
asserts `updateTag` imported from `next/cache` inside a 'use server' action: evals/agent-037-updatetag-cache/EVAL.ts).

Each task: (id, prompt as a developer would type it, the bundled Next.js docs that answer it — paths under
`next/dist/docs/`, any one of them counts — and the API names the injected context must carry for the agent to
write the code). The prompts avoid quoting the docs so retrieval has to bridge a task to its reference page.
"""

FN = "01-app/03-api-reference/04-functions/"
FC = "01-app/03-api-reference/03-file-conventions/"
CMP = "01-app/03-api-reference/02-components/"
DIR = "01-app/03-api-reference/01-directives/"

TASKS = [
    ("updatetag-cache", "After a user creates a post in a server action, the posts list must show the new post right "
     "away instead of stale cached data. Invalidate the 'posts' tag so the user reads their own write.",
     [FN + "updateTag.md"], ["updateTag"]),
    ("revalidate-path", "When a comment is saved from the form, refresh the cached /blog page so the comment shows up.",
     [FN + "revalidatePath.md"], ["revalidatePath"]),
    ("use-cache-lifetime", "Cache the result of an expensive product query across requests with the cache directive "
     "and keep it for one hour.", [DIR + "use-cache.md", FN + "cacheLife.md"], ["use cache", "cacheLife"]),
    ("cache-tag", "Label the cached output of a cached data function so that it can be invalidated on demand later.",
     [FN + "cacheTag.md"], ["cacheTag"]),
    ("after-response", "Send an analytics event once the response has finished streaming to the user, without "
     "delaying the page.", [FN + "after.md"], ["after"]),
    ("read-cookie", "Read the user's theme preference from a cookie inside a server component.",
     [FN + "cookies.md"], ["cookies"]),
    ("read-header", "Show a different banner depending on the incoming request's user agent header in a server "
     "component.", [FN + "headers.md", FN + "userAgent.md"], ["headers"]),
    ("redirect-login", "If nobody is signed in, send the visitor to /login from the server action that saves "
     "settings.", [FN + "redirect.md"], ["redirect"]),
    ("product-404", "When the product id in the URL does not exist, render the 404 page instead of crashing.",
     [FN + "not-found.md", FC + "not-found.md"], ["notFound"]),
    ("search-params-suspense", "A client component reads the ?q= query string on an otherwise static page; the build "
     "fails with a missing boundary error. Fix it.", [FN + "use-search-params.md"], ["useSearchParams", "Suspense"]),
    ("dynamic-metadata", "Set the browser tab title and the meta description of the product page from the product "
     "that page fetched.", [FN + "generate-metadata.md"], ["generateMetadata"]),
    ("prebuild-slugs", "Pre-render every blog post page of the [slug] route at build time.",
     [FN + "generate-static-params.md"], ["generateStaticParams"]),
    ("api-health", "Add an endpoint at /api/health that answers GET requests with a small JSON body.",
     [FC + "route.md"], ["GET", "Response"]),
    ("rewrite-old-path", "Before any route runs, rewrite requests for /old to /new; in this Next.js version the "
     "request interception file has a new name.", [FC + "proxy.md"], ["proxy"]),
    ("await-params", "The [id] page reads params.id and now errors because params is asynchronous; update the page.",
     [FC + "page.md", FC + "dynamic-routes.md"], ["params", "await"]),
    ("remote-image", "Show the avatar hosted on images.example.com with automatic resizing and lazy loading.",
     [CMP + "image.md"], ["remotePatterns"]),
    ("google-font", "Use the Inter typeface from Google Fonts across the app without layout shift.",
     [CMP + "font.md"], ["next/font/google"]),
    ("search-form", "Make the search box submit to /search with the query as a URL parameter, with client-side "
     "navigation and prefetching of the results page.", [CMP + "form.md"], ["next/form"]),
    ("form-errors", "Display the validation errors that the signup server action returns next to the form fields.",
     ["01-app/02-guides/forms.md"], ["useActionState"]),
    ("request-time-render", "Make this server component render at request time instead of at build time before it "
     "reads the current date.", [FN + "connection.md"], ["connection"]),
    ("admin-403", "Signed-in users without the admin role must get a 403 page on /admin.",
     [FN + "forbidden.md", FC + "forbidden.md"], ["forbidden"]),
    ("dashboard-slots", "Render the analytics panel and the team panel of the dashboard side by side as independent "
     "slots of one layout.", [FC + "parallel-routes.md"], ["@analytics"]),
]
