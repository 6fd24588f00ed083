"""Adding routers, with a test's own settings, to an app made by ``agent.server.create_app``.

They go ahead of every route the app has: ahead of the web client mounted at ``/`` (a mount
there answers every path), and ahead of the app's own copy of the same routes, built from the
config, so the test's instance is the one that answers.
"""

from fastapi import APIRouter, FastAPI


def include_first(app: FastAPI, *routers: APIRouter) -> FastAPI:
    existing = list(app.router.routes)
    for router in routers:
        app.include_router(router)
    added = app.router.routes[len(existing) :]
    app.router.routes[:] = added + existing
    return app
