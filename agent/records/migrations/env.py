"""Alembic's environment for the call records: runs on the connection ``CallRecords`` hands it."""

from alembic import context

from agent.records.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
